#include "train/factories.hpp"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "base/cpu_threads.hpp"
#include "base/failure.hpp"
#include "dist/device_mesh.hpp"
#include "train/cpu_memory.hpp"
#include "train/stage_runner.hpp"
#include "train/device.hpp"
#include "train/mapped_cuda_memory.hpp"
#include "train/mesh_groups.hpp"
#include "train/cuda_probe.hpp"
#include "train/peak_flops.hpp"
#include "train/trainer.hpp"

namespace loom {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// run.gpu_memory_gib on a CUDA device (check_run_plan refused it elsewhere).
void cap_device_memory(double gib, const at::Device& device) {
  const int64_t total = cuda_total_bytes(device);
  if (total <= 0)
    throw usage_failure("[run] gpu_memory_gib = " + fmt::format("{:g}", gib) + ": this host cannot read " +
                        device.str() + "'s memory (built without the CUDA toolkit?); remove gpu_memory_gib");
  const double fraction = gib * kGiB / static_cast<double>(total);
  if (fraction > 1.0)
    throw usage_failure(fmt::format("[run] gpu_memory_gib = {:g}: {} has {:.1f} GiB; set at most that, or 0 for no cap",
                                    gib, device.str(), static_cast<double>(total) / kGiB));
  cap_cuda_memory(device, fraction);
  spdlog::info("run.gpu_memory_gib = {:g}: LibTorch's caching allocator may hold {:.1f} of {}'s {:.1f} GiB", gib, gib,
               device.str(), static_cast<double>(total) / kGiB);
}

}  // namespace

void apply_run_settings(const RunSettings& run, const at::Device& device, int local_ranks) {
  set_low_priority_helpers(run.low_priority_helpers);
  spdlog::info("{}", configure_cpu_threads(run.threads, local_ranks));
  if (run.cpu_memory_cache) keep_freed_cpu_memory();
  apply_determinism(run.deterministic);
  apply_precision(run.precision, device);
  spdlog::info("device {} ({}), precision {}", device.str(), run.device, precision_name(run.precision));
  if (run.gpu_memory_gib > 0) cap_device_memory(run.gpu_memory_gib, device);
  at::manual_seed(static_cast<uint64_t>(run.seed));
}

bool uses_nccl(const DistributedSettings& distributed, const at::Device& device) {
  return distributed.backend == "nccl" || (distributed.backend == "auto" && device.is_cuda());
}

void check_run_plan(const RunPlan& plan, const DistEnv& env) {
  const at::Device device = resolve_device(plan.run.device, env.local_rank, plan.run.device_at);
  if (plan.run.gpu_memory_gib > 0 && !device.is_cuda())
    throw usage_failure(fmt::format("[run] gpu_memory_gib = {:g} caps CUDA's memory, but this run is on {}; remove it "
                                    "or set run.device = \"cuda\"",
                                    plan.run.gpu_memory_gib, device.str()));
  check_pipeline_parallel(plan.distributed);  // before the mesh: a combination not built is the clearer line
  make_device_mesh(env.world_size, env.rank, static_cast<int>(plan.distributed.tensor_parallel),
                   static_cast<int>(plan.distributed.sequence_parallel),
                   static_cast<int>(plan.distributed.context_parallel),
                   static_cast<int>(plan.distributed.pipeline_parallel));  // their product divides the world
  check_expert_parallel(plan.distributed, env.world_size);
  check_sparse_tables(plan, env.world_size);
  if (env.world_size <= 1 || !uses_nccl(plan.distributed, device)) return;
  if (!Communicator::nccl_available())
    throw usage_failure("[distributed] backend nccl: this host was built without NCCL (no CUDA toolkit with NCCL "
                        "at build time); use backend = \"gloo\" with run.device = \"cpu\"");
  if (!device.is_cuda())
    throw usage_failure("[distributed] backend nccl moves CUDA tensors; set run.device = \"cuda\" or use gloo");
}

std::unique_ptr<Communicator> build_communicator(const RunPlan& plan, const DistEnv& env, const at::Device& device) {
  if (env.world_size <= 1) return nullptr;
  const bool nccl = uses_nccl(plan.distributed, device);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(1e3 * plan.distributed.timeout_s));
  auto comm = std::make_unique<Communicator>(env, timeout, nccl, device.has_index() ? device.index() : 0);
  spdlog::info("rank {} of {} joined through {}:{} ({}, {})", env.rank, env.world_size, env.master_addr,
               env.master_port, env.launcher, nccl ? "nccl" : "gloo");
  return comm;
}

std::unique_ptr<GradientSync> build_gradient_sync(const RunPlan& plan, Pipeline& pipeline, Communicator* comm,
                                                  Communicator* placed_group, Communicator* placed_replicas) {
  if (!comm) return nullptr;
  const std::vector<bool> placed = pipeline.flat.placed_groups(), sharded = pipeline.flat.sharded_groups();
  const bool slices_only = pipeline.flat.shard().mode == ShardMode::parameters;
  std::vector<at::Tensor> buffers = pipeline.flat.param_buffers();
  for (size_t g = 0; g < buffers.size(); ++g) {  // placed groups: the first of their replicas' everywhere
    // shard = "parameters": a slice's one copy is its owner's (the gathers broadcast it from
    // there), and the whole buffer is never to be resident (train/sliced_start.hpp).
    if (slices_only && sharded[g]) continue;
    Communicator* over = placed[g] && placed_group ? placed_replicas : comm;
    if (over) over->broadcast(buffers[g], 0);
  }
  for (const ModelParam& table : sparse_params(pipeline.model.params())) {  // replicated: rank 0's rows everywhere
    if (pipeline.sparse.row_sharded()) break;                               // row-sharded: each rank its own rows
    at::NoGradGuard no_grad;
    at::Tensor weight = table.tensor->detach();
    comm->broadcast(weight, 0);
  }
  const auto bucket_bytes = static_cast<int64_t>(plan.distributed.bucket_mb * 1024 * 1024);
  return std::make_unique<GradientSync>(dense_params(pipeline.model.params()), pipeline.flat, *comm, bucket_bytes,
                                        placed_group, placed_replicas);
}

std::unique_ptr<ParameterShards> build_parameter_shards(const RunPlan& plan, Pipeline& pipeline, Communicator* comm,
                                                        const at::Device& device) {
  if (pipeline.flat.shard().mode != ShardMode::parameters || !comm) return nullptr;
  if (device.is_cuda() && !mapped_cuda_memory_built())
    throw usage_failure("[distributed] shard = \"parameters\" on " + device.str() +
                        ": this build has no CUDA runtime to give memory back with; use shard = \"gradients\"");
  if (device.is_cuda())
    spdlog::warn("[distributed] shard = \"parameters\" on {}: each layer's weights are mapped while it runs and "
                 "unmapped after (CUDA virtual memory); this path has not run on a GPU yet, so compare the losses "
                 "with shard = \"gradients\"", device.str());
  else if (!device.is_cpu())
    throw usage_failure("[distributed] shard = \"parameters\" gives memory back on the CPU and CUDA only; on " +
                        device.str() + " use shard = \"gradients\"");
  if (plan.hf_export.enabled)
    throw usage_failure("[distributed] shard = \"parameters\" with [export]: no rank holds the whole model between "
                        "steps; drop [export] and run `host export` on a checkpoint");
  return std::make_unique<ParameterShards>(dense_params(pipeline.model.params()), pipeline.flat, *comm,
                                           pipeline.model.component().name);
}

std::unique_ptr<Evaluator> build_evaluator(const RunPlan& plan, Pipeline& pipeline, const at::Device& device,
                                           Communicator* comm) {
  if (!pipeline.eval_data) return nullptr;
  return std::make_unique<Evaluator>(*pipeline.eval_data, plan.eval.max_batches, device, plan.run.precision, comm,
                                     pipeline.sparse.row_sharded());
}

std::unique_ptr<CheckpointManager> build_checkpoints(const RunPlan& plan, Pipeline& pipeline,
                                                     const std::string& run_dir) {
  if (!pipeline.checkpoint) return nullptr;
  return std::make_unique<CheckpointManager>(plan.checkpoint, *pipeline.checkpoint, *plan.registry, run_dir);
}

MfuBaseline build_mfu_baseline(ModelInstance& model, const RunSettings& run, const at::Device& device, int ranks) {
  MfuBaseline out{model.flops_per_token(), run.peak_flops};
  if (out.flops_per_token > 0 && out.peak_flops <= 0) {
    const PeakFlops peak = mfu_peak(device, device.is_cuda() ? cuda_device_name(device) : "", run.precision, 0);
    out.peak_flops = peak.flops;
    spdlog::info("MFU is reported against {}: {:.1f} GFLOP/s{}", peak.source, out.peak_flops / 1e9,
                 ranks > 1 ? fmt::format(" a rank, x {} ranks", ranks) : "");
  }
  // The logged tokens are the whole run's and the model's FLOPs those of the whole model, so
  // the peak is every rank's: data, tensor and sequence parallel alike.
  out.peak_flops *= std::max(ranks, 1);
  return out;
}

}  // namespace loom
