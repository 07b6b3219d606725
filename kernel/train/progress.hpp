// progress.hpp: where the run stands. The one place that holds the step number; hooks see it
// through view(), built field by field so that a new loom_state_view field cannot shift the
// others.
#pragma once

#include <loom/hook.h>

#include <cstdint>
#include <limits>
#include <string>

namespace loom {

struct Progress {
  int64_t step = 0;         // optimizer steps completed
  int64_t total_steps = 0;  // run.steps
  int64_t tokens = 0;       // tokens with loss seen so far, all ranks
  int64_t epoch = 0;        // epochs the dataset has ended (finite datasets; 0 for endless ones)
  double elapsed_s = 0;     // training time across every resumed segment
  // Of the latest step; NaN until it is known.
  double loss = std::numeric_limits<double>::quiet_NaN();
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  double lr = 0;

  // The hooks' read-only view; run_dir, metrics and message are borrowed.
  loom_state_view view(const std::string& run_dir, int32_t rank, int32_t world_size,
                       const loom_metrics* metrics = nullptr, const char* message = nullptr) const {
    loom_state_view v{};
    v.struct_size = sizeof(v);
    v.step = step;
    v.total_steps = total_steps;
    v.epoch = epoch;
    v.loss = loss;
    v.grad_norm = grad_norm;
    v.lr = lr;
    v.tokens = tokens;
    v.metrics = metrics;
    v.run_dir = run_dir.c_str();
    v.rank = rank;
    v.world_size = world_size;
    v.message = message;
    return v;
  }
};

}  // namespace loom
