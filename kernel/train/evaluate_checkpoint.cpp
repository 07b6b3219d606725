#include "train/evaluate_checkpoint.hpp"

#include <spdlog/spdlog.h>

#include "base/failure.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "checkpoint/checkpoint_manager.hpp"
#include "train/device.hpp"
#include "train/evaluator.hpp"
#include "train/factories.hpp"
#include "train/run_state.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

fs::path choose_checkpoint(const RunPlan& plan, const fs::path& given) {
  if (!given.empty()) {
    std::string why;
    if (!verify_checkpoint(given, &why))
      throw usage_failure(given.string() + ": not a valid checkpoint (" + why + "); pass a step-N folder");
    return given;
  }
  const fs::path run_dir = fs::path(plan.run.dir) / plan.run.name;
  const fs::path dir = fs::path(plan.checkpoint.dir).is_absolute() ? fs::path(plan.checkpoint.dir)
                                                                   : run_dir / plan.checkpoint.dir;
  if (auto newest = newest_valid_checkpoint(dir)) return *newest;
  throw usage_failure(dir.string() + ": no valid checkpoint to evaluate; train first, or pass --checkpoint DIR");
}

}  // namespace

CheckpointEvaluation evaluate_checkpoint(const RunPlan& plan, const fs::path& given, const DistEnv& env) {
  if (env.world_size > 1)
    throw usage_failure("host eval runs as one process; start it without a launcher (RANK/WORLD_SIZE are set)");
  if (!plan.eval_data.component)
    throw usage_failure("host eval: the manifest has no [eval_data] table; add one with use = \"<dataset>\"");
  CheckpointEvaluation out;
  out.checkpoint = choose_checkpoint(plan, given);
  const at::Device device = resolve_device(plan.run.device, env.local_rank, plan.run.device_at);
  apply_run_settings(plan.run, device, env.local_world_size);
  // Components get the manifest's run folder: a checkpoint folder is sealed by its index, and
  // a file a component wrote there would make it invalid.
  const fs::path run_dir = fs::path(plan.run.dir) / plan.run.name;
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw runtime_failure(run_dir.string() + ": cannot create the run folder: " + ec.message());
  RunContext context;
  context.run_dir = run_dir.string();
  context.device = device.str();
  context.seed = static_cast<uint64_t>(plan.run.seed);
  context.total_steps = plan.run.steps;
  context.adapters = plan.lora;
  ModelInstance model(plan.model, context);
  DatasetInstance data(plan.eval_data, context);
  const auto backend = open_backend(read_checkpoint_backend(out.checkpoint), *plan.registry, out.checkpoint);
  const LoadedCheckpoint loaded = read_checkpoint(*backend, out.checkpoint);
  out.step = read_restored_run(loaded, out.checkpoint.string()).step;
  prepare_for_restore(model, plan, loaded);
  restore_model(model, loaded, out.checkpoint.string());
  spdlog::info("evaluating {} (step {}) on [eval_data] {}, {} batches", out.checkpoint.string(), out.step,
               data.component().name, plan.eval.max_batches);
  out.metrics = Evaluator(data, plan.eval.max_batches, device, plan.run.precision, nullptr).run(model);
  return out;
}

}  // namespace loom
