// run_state.hpp: a live pipeline as a checkpoint's contents and back (docs/design.md
// "Checkpoints"): everything needed to continue a run exactly, as named CPU tensors plus JSON
// metadata. The checkpoint layer stores and reads them; this file knows what they mean.
//
// Tensor names: model/<param>, optimizer/<state>, rng/cpu, rng/cuda (runs on a GPU), data/rank<r>, and
// <slot>/<component> (e.g. hooks[0]/early_stop) for hooks and trackers that keep state.
#pragma once

#include <string>
#include <vector>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/snapshot.hpp"
#include "train/pipeline.hpp"
#include "train/progress.hpp"

namespace loom {

// Where a checkpoint keeps the [sparse_optimizer]'s state: this prefix and the state's name.
inline const std::string kSparseOptimizerPrefix = "sparse_optimizer/";

// A contiguous CPU copy that training may not change while it is written.
at::Tensor cpu_copy(const at::Tensor& t);

// Copies the pipeline's state at a step boundary. data_states: every rank's dataset position
// after the last batch consumed (not produced: the prefetcher runs ahead), in rank order.
Snapshot capture_snapshot(Pipeline& p, const Progress& progress, const std::vector<std::string>& data_states,
                          const std::string& resolved_manifest);

// A sharded run's part of a checkpoint (checkpoint/sharded_checkpoint.hpp): this rank's slices
// of the flat parameters and of the elementwise optimizer state; rank 0's part also holds what
// capture_snapshot adds besides weights and optimizer state, and the layout.
Snapshot capture_shard_part(Pipeline& p, const Progress& progress, const std::vector<std::string>& data_states,
                            const std::string& resolved_manifest);

struct RestoredRun {
  int64_t step = 0, tokens = 0, epoch = 0;
  double elapsed_s = 0;
  int world_size = 1;                    // of the run that wrote the checkpoint
  std::vector<std::string> data_states;  // per rank; load before prefetching starts
  std::string resolved_manifest;         // of the run that wrote the checkpoint
};

// Reads counters, manifest and data position; throws a runtime Failure when the metadata is
// not Loom's. `origin` names the checkpoint for messages.
RestoredRun read_restored_run(const LoadedCheckpoint& loaded, const std::string& origin);

// Copies the model parameters alone (evaluation); throws like restore_tensors. Frozen
// parameters the checkpoint left out ([checkpoint] frozen = "reference") keep the values the
// model has, which must have the checksum the checkpoint recorded (a usage Failure otherwise).
void restore_model(ModelInstance& model, const LoadedCheckpoint& loaded, const std::string& origin);

// A model built outside a run (host eval, export, generate) made ready for restore_model: its
// frozen parameters marked as the run marked them and, when the checkpoint left some weights
// out, rebuilt from their source first ([model] init_from; train/frozen_params.hpp).
void prepare_for_restore(ModelInstance& model, const RunPlan& plan, const LoadedCheckpoint& loaded);

// Copies model parameters, optimizer state, RNG state and hook and tracker state into the
// pipeline; throws a runtime Failure naming what does not fit (missing tensor, other shape).
// Every tensor must be claimed: model or optimizer tensors that nothing restores are an error
// unless rules.allow_unclaimed (then a warning names them); state of hooks and trackers no
// longer in the manifest is dropped with a warning. Weights and optimizer state holding NaN or
// infinities are refused unless rules.allow_nonfinite.
struct RestoreRules {
  bool allow_nonfinite = false;
  bool allow_unclaimed = false;
};
void restore_tensors(Pipeline& p, const LoadedCheckpoint& loaded, const std::string& origin,
                     const RestoreRules& rules = {});

// "model/wte.weight (3 of 4096)": the floating tensors named with a prefix in `prefixes` that
// hold NaN or infinite values, with their counts; empty when all are finite.
std::vector<std::string> nonfinite_tensors(const LoadedCheckpoint& loaded, const std::vector<std::string>& prefixes);

}  // namespace loom
