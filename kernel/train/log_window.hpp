// log_window.hpp: the metrics a run gathers between two log events, and the record that the
// trackers receive at the end of the window.
#pragma once

#include <algorithm>
#include <chrono>

#include "abi/observer_components.hpp"
#include "train/progress.hpp"

namespace loom {

class LogWindow {
 public:
  using Clock = std::chrono::steady_clock;

  void add_step(int64_t tokens) {
    steps_ += 1;
    tokens_ += tokens;
  }
  // Losses arrive when the trainer reads them from the device (step_values.hpp): a sum over
  // one or more of the window's steps.
  void add_loss_sum(double loss_sum) { loss_sum_ += loss_sum; }
  void add_data_seconds(double seconds) { data_seconds_ += seconds; }
  int64_t steps() const { return steps_; }

  // The window's record, and a new window. eta_s extrapolates the window's time per step to the
  // end of the run (wall time: on a GPU the host runs ahead of the device between reads, so its
  // own per-step times say little); mfu appears when the model reports its FLOPs per token.
  MetricList finish(const Progress& progress, double flops_per_token, double peak_flops) {
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    const double seconds_per_step = seconds / steps_;
    const double tokens_per_s = tokens_ / std::max(seconds, 1e-9);
    MetricList m = {{"loss", loss_sum_ / steps_},
                    {"lr", progress.lr},
                    {"grad_norm", progress.grad_norm},
                    {"tokens_per_s", tokens_per_s},
                    {"step_time_ms", 1e3 * seconds / steps_},
                    {"data_time_ms", 1e3 * data_seconds_ / steps_},
                    {"eta_s", seconds_per_step * static_cast<double>(progress.total_steps - progress.step)},
                    {"tokens", static_cast<double>(progress.tokens)}};
    if (flops_per_token > 0 && peak_flops > 0) m.emplace_back("mfu", flops_per_token * tokens_per_s / peak_flops);
    *this = LogWindow{};
    return m;
  }

 private:
  Clock::time_point start_ = Clock::now();
  int64_t steps_ = 0, tokens_ = 0;
  double loss_sum_ = 0, data_seconds_ = 0;
};

}  // namespace loom
