// trainer.hpp: runs a resolved plan: the training loop of docs/design.md "One training step".
#pragma once

#include <functional>
#include <string>

#include "dist/dist_env.hpp"
#include "train/run_plan.hpp"

namespace loom {

struct TrainSummary {
  int64_t steps = 0;          // optimizer steps this process ran (a rollback's repeats count)
  int64_t skipped_steps = 0;  // steps whose update a hook dropped
  int64_t nonfinite_steps = 0;  // steps whose loss was NaN or infinite
  double first_loss = 0, last_loss = 0;  // the first and last logged loss (means over a log window)
  bool already_complete = false;  // resumed at or past the last step: nothing ran
  double seconds = 0;
};

// Everything a manifest can get wrong that only shows when the run starts (the device, the
// distributed backend, an explicit resume path), checked before the run folder is written.
// Throws a usage Failure.
void check_run_plan(const RunPlan& plan, const DistEnv& env);

// Runs the whole training; run_dir exists already. env: this process's place among the ranks.
// ranks_met runs once every rank has joined (at once in a single process): rank 0 holds the
// run folder's lock by then, so the other ranks may start writing. Throws Failure.
TrainSummary train(const RunPlan& plan, const std::string& run_dir, const DistEnv& env,
                   const std::function<void()>& ranks_met);

}  // namespace loom
