// evaluate_checkpoint.hpp: `host eval`: a checkpoint's model weights, evaluated on the plan's
// [eval_data] without training: no optimizer step, no trackers, nothing written.
#pragma once

#include <filesystem>

#include "abi/observer_components.hpp"
#include "dist/dist_env.hpp"
#include "train/run_plan.hpp"

namespace loom {

struct CheckpointEvaluation {
  std::filesystem::path checkpoint;  // empty: no checkpoint; the model as the manifest builds it
  bool built_by_manifest = false;    // the run had no checkpoint yet (step 0)
  int64_t step = 0;    // the step the checkpoint was written at
  MetricList metrics;  // what the evaluator reports (train/evaluator.hpp)
};

// checkpoint: a step-N folder, or empty for the newest valid one in the run's checkpoint
// folder; when that folder has none, the model as the manifest builds it (a Hugging Face
// folder, init_from, or its initialisation: the score before fine-tuning). Throws a usage
// Failure when the plan has no [eval_data] or a given checkpoint is not valid, a runtime
// Failure when the checkpoint does not fit the model.
CheckpointEvaluation evaluate_checkpoint(const RunPlan& plan, const std::filesystem::path& checkpoint,
                                         const DistEnv& env);

}  // namespace loom
