// checkpoint_settings.hpp: the [checkpoint] table's host-side options (the backend's own
// options go to its slot). Defaults live here once; config/host_tables.cpp documents them.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

struct CheckpointSettings {
  bool enabled = false;              // a [checkpoint] table is present
  int64_t every = 0;                 // save every N steps; 0: only at the end and on signals
  int64_t keep = 3;                  // newest checkpoints kept
  int64_t keep_every = 0;            // steps that are multiples of this are never deleted
  bool every_epoch = false;          // also save after each step in which an epoch ended
  bool at_end = true;
  bool async = true;
  std::string resume = "auto";       // "auto", "none" or a checkpoint directory
  std::string dir = "checkpoints";   // relative to the run directory
  bool allow_nonfinite = false;      // resume from weights or optimizer state holding NaN/inf
  bool allow_unclaimed = false;      // resume although tensors are left that nothing restores
  std::string frozen = "reference";  // frozen weights: "reference" (checksum of their source) or "include"
};

}  // namespace loom
