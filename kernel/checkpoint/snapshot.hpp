// snapshot.hpp: what one save writes: named CPU tensors plus JSON metadata, copied at a step
// boundary so that training may go on while they are written (train/run_state.hpp makes them).
#pragma once

#include <cstdint>
#include <string>

#include "abi/checkpoint_backend.hpp"

namespace loom {

struct Snapshot {
  int64_t step = 0;
  NamedTensors tensors;  // CPU copies
  std::string metadata_json;
};

}  // namespace loom
