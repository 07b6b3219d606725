// trainer.hpp: assembles the pipeline from resolved slots and runs the training loop of
// DESIGN.md "One training step".
#pragma once

#include <string>

#include "dist_env.hpp"
#include "pipeline_config.hpp"

namespace loom {

struct TrainSummary {
  int64_t steps = 0;          // optimizer steps run
  int64_t skipped_steps = 0;  // steps whose update a hook dropped
  double first_loss = 0, last_loss = 0;
  double seconds = 0;
};

// Runs the whole training; run_dir exists already. env: this process's place among the ranks.
// Throws Failure.
TrainSummary train(const PipelineConfig& config, const std::string& run_dir, const DistEnv& env);

}  // namespace loom
