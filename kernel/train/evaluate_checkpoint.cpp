#include "train/evaluate_checkpoint.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "base/failure.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "checkpoint/checkpoint_manager.hpp"
#include "train/device.hpp"
#include "train/evaluator.hpp"
#include "train/factories.hpp"
#include "train/frozen_params.hpp"
#include "train/run_state.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// The checkpoint to evaluate: the given one, else the run's newest; empty when the run has none
// (then the model is evaluated as the manifest builds it). `searched` names the folder looked in.
fs::path choose_checkpoint(const RunPlan& plan, const fs::path& given, fs::path& searched) {
  if (!given.empty()) {
    std::string why;
    if (!verify_checkpoint(given, &why))
      throw usage_failure(given.string() + ": not a valid checkpoint (" + why + "); pass a step-N folder");
    return given;
  }
  const fs::path run_dir = fs::path(plan.run.dir) / plan.run.name;
  searched = fs::path(plan.checkpoint.dir).is_absolute() ? fs::path(plan.checkpoint.dir) : run_dir / plan.checkpoint.dir;
  if (auto newest = newest_valid_checkpoint(searched)) return *newest;
  return {};
}

// Reads `checkpoint`. A live run's rotation ([checkpoint] keep) may delete it meanwhile; it
// renames a checkpoint away whole before deleting it, so a failed read of a folder that is no
// longer there was a rotation, not damage. Then the newest one is read instead where the user
// asked for the newest (no --checkpoint), and said so; a named one is reported as removed.
LoadedCheckpoint read_surviving_rotation(const RunPlan& plan, const fs::path& given, fs::path& checkpoint) {
  constexpr int kAttempts = 5;
  // Test support: LOOM_TEST_EVAL_READ_DELAY_MS waits between choosing and reading, so a test
  // can have a live run rotate the chosen checkpoint away.
  if (const char* ms = std::getenv("LOOM_TEST_EVAL_READ_DELAY_MS")) {
    spdlog::info("LOOM_TEST_EVAL_READ_DELAY_MS: reading {} in {} ms", checkpoint.string(), ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(ms)));
  }
  for (int attempt = 1;; ++attempt) {
    try {
      const auto backend = open_backend(read_checkpoint_backend(checkpoint), *plan.registry, checkpoint);
      return read_checkpoint(*backend, checkpoint);
    } catch (const std::exception&) {
      std::error_code ec;
      if (fs::exists(checkpoint, ec) || ec) throw;  // still there: the error stands
    }
    const std::string removed = "checkpoint " + checkpoint.string() +
                                " was removed while being read (a live run deletes checkpoints past [checkpoint] keep)";
    if (!given.empty()) throw runtime_failure(removed + "; pass a newer one, or leave out --checkpoint for the newest");
    fs::path searched;
    const fs::path newest = choose_checkpoint(plan, given, searched);
    if (newest.empty()) throw runtime_failure(removed + " and " + searched.string() + " holds no other valid checkpoint");
    if (attempt == kAttempts)
      throw runtime_failure(removed + ", " + std::to_string(kAttempts) + " times in a row; the newest is " +
                            newest.string() + ": evaluate it with --checkpoint, or when the run is not saving");
    spdlog::warn("{}; the newest is {}: evaluating that", removed, newest.filename().string());
    checkpoint = newest;
  }
}

}  // namespace

CheckpointEvaluation evaluate_checkpoint(const RunPlan& plan, const fs::path& given, const DistEnv& env) {
  if (env.world_size > 1)
    throw usage_failure("host eval runs as one process; start it without a launcher (RANK/WORLD_SIZE are set)");
  if (!plan.eval_data.component)
    throw usage_failure("host eval: the manifest has no [eval_data] table; add one with use = \"<dataset>\"");
  CheckpointEvaluation out;
  fs::path searched;
  out.checkpoint = choose_checkpoint(plan, given, searched);
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
  if (out.checkpoint.empty()) {
    // The score before any training (a Hugging Face folder, init_from, or the initialisation):
    // what the model is when a run starts, frozen weights and [lora] adapters included.
    prepare_model(model, plan);
    out.built_by_manifest = true;
    spdlog::info("no checkpoint in {}: evaluating model {} as the manifest builds it (before any training) on "
                 "[eval_data] {}, {} batches", searched.string(), model.component().name, data.component().name,
                 plan.eval.max_batches);
  } else {
    const LoadedCheckpoint loaded = read_surviving_rotation(plan, given, out.checkpoint);
    out.step = read_restored_run(loaded, out.checkpoint.string()).step;
    prepare_for_restore(model, plan, loaded);
    restore_model(model, loaded, out.checkpoint.string());
    spdlog::info("evaluating {} (step {}) on [eval_data] {}, {} batches", out.checkpoint.string(), out.step,
                 data.component().name, plan.eval.max_batches);
  }
  out.metrics = Evaluator(data, plan.eval.max_batches, device, plan.run.precision, nullptr).run(model);
  return out;
}

}  // namespace loom
