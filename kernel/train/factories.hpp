// factories.hpp: factories that assemble a run's parts from its plan, so that the trainer's
// constructor reads as a list. Each returns null where the plan has no such part.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "checkpoint/checkpoint_manager.hpp"
#include "dist/communicator.hpp"
#include "dist/dist_env.hpp"
#include "train/evaluator.hpp"
#include "train/grad_sync.hpp"
#include "train/parameter_shards.hpp"
#include "train/pipeline.hpp"
#include "train/run_plan.hpp"

namespace loom {

// Process-wide switches from [run]: CPU threads (shared by local_ranks processes on this
// machine; the choice is logged), the CPU memory cache, determinism, precision, and the seed
// of the default generator (dropout draws from it).
void apply_run_settings(const RunSettings& run, const at::Device& device, int local_ranks);

// Whether the collectives on the run's tensors go through NCCL ([distributed] backend).
bool uses_nccl(const DistributedSettings& distributed, const at::Device& device);

// Collectives between the ranks; null in a single-process run. Blocks until every rank joined.
std::unique_ptr<Communicator> build_communicator(const RunPlan& plan, const DistEnv& env, const at::Device& device);

// The gradient all-reduce that overlaps backward; null without comm. First makes every rank
// start from rank 0's weights, whatever its own init drew (placed groups: from the first rank
// holding the same ones). placed_group, placed_replicas: train/mesh_groups.hpp's, or null.
std::unique_ptr<GradientSync> build_gradient_sync(const RunPlan& plan, Pipeline& pipeline, Communicator* comm,
                                                  Communicator* placed_group = nullptr,
                                                  Communicator* placed_replicas = nullptr);
// shard = "parameters" on more than one rank: the unit-by-unit gathering (after
// build_gradient_sync, whose broadcast makes every rank's weights rank 0's); otherwise null.
// Throws a usage Failure where the mode cannot run (a CUDA device, [export]).
std::unique_ptr<ParameterShards> build_parameter_shards(const RunPlan& plan, Pipeline& pipeline, Communicator* comm,
                                                        const at::Device& device);

// Evaluation on [eval_data]; null without it.
std::unique_ptr<Evaluator> build_evaluator(const RunPlan& plan, Pipeline& pipeline, const at::Device& device,
                                           Communicator* comm);

// Saving and resuming; null without [checkpoint].
std::unique_ptr<CheckpointManager> build_checkpoints(const RunPlan& plan, Pipeline& pipeline,
                                                     const std::string& run_dir);

// What MFU (model FLOPs utilization) is measured against; zero when the model reports no
// FLOPs per token, and then no MFU is logged.
struct MfuBaseline {
  double flops_per_token = 0;  // the model's count
  double peak_flops = 0;       // peak_flops.hpp: run.peak_flops, the datasheet's or a measured GEMM's
};
// ranks: the world size; MFU divides by the peak of every rank's device.
MfuBaseline build_mfu_baseline(ModelInstance& model, const RunSettings& run, const at::Device& device, int ranks);

}  // namespace loom
