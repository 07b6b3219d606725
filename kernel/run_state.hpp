// run_state.hpp: everything needed to continue a run exactly, as named CPU tensors plus JSON
// metadata (DESIGN.md "Checkpoints"), and the way back into a live pipeline.
//
// Tensor names: model/<param>, optimizer/<state>, rng/cpu, rng/cuda (runs on a GPU), data/rank<r>, and
// <slot>/<component> (e.g. hooks[0]/early_stop) for hooks and trackers that keep state.
#pragma once

#include <string>
#include <vector>

#include "checkpoint_backend.hpp"
#include "pipeline.hpp"

namespace loom {

struct RunCounters {
  int64_t step = 0;       // optimizer steps completed
  int64_t tokens = 0;     // tokens with loss seen, all ranks
  double elapsed_s = 0;   // training time across every resumed segment
};

struct Snapshot {
  int64_t step = 0;
  NamedTensors tensors;   // CPU copies: training may go on while they are written
  std::string metadata_json;
};

// Copies the pipeline's state at a step boundary. data_state: the dataset position after the
// last batch consumed (not produced: the prefetcher runs ahead).
// data_states: every rank's position, in rank order.
Snapshot capture_snapshot(Pipeline& p, const RunCounters& counters, const std::vector<std::string>& data_states,
                          const std::string& resolved_manifest);

struct RestoredRun {
  RunCounters counters;
  int world_size = 1;                    // of the run that wrote the checkpoint
  std::vector<std::string> data_states;  // per rank; load before prefetching starts
  std::string resolved_manifest;  // of the run that wrote the checkpoint
};

// Reads counters, manifest and data position; throws a runtime Failure when the metadata is
// not Loom's. `origin` names the checkpoint for messages.
RestoredRun read_restored_run(const LoadedCheckpoint& loaded, const std::string& origin);

// Copies model parameters, optimizer state and RNG state into the pipeline; throws a runtime
// Failure naming what does not fit (missing tensor, other shape).
void restore_tensors(Pipeline& p, const LoadedCheckpoint& loaded, const std::string& origin);

}  // namespace loom
