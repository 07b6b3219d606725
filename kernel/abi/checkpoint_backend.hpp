// checkpoint_backend.hpp: the host's owner of a checkpoint-backend plugin. The backend turns
// named CPU tensors plus JSON metadata into files in a directory, and back; the checkpoint
// manager decides when, where, and how the write is made atomic.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "abi/instance.hpp"

namespace loom {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;  // contiguous CPU tensors

struct LoadedCheckpoint {
  std::map<std::string, at::Tensor> tensors;  // copies owned by the host
  std::string metadata_json;
  // Row-split tables read as one rank's rows only (checkpoint/row_parts.hpp RowWindow).
  std::set<std::string> rows_windowed;
};

class CheckpointBackendInstance : public Instance<loom_checkpoint_vtable, loom_checkpoint> {
 public:
  CheckpointBackendInstance(const SlotConfig& slot, const RunContext& run);
  // dir exists and is empty; files must be complete when this returns.
  void save(const std::string& dir, const NamedTensors& tensors, const std::string& metadata_json);
  LoadedCheckpoint load(const std::string& dir);
};

}  // namespace loom
