// nan_guard.cpp: the `nan_guard` hook. Before each optimizer step it checks that the loss and
// the gradient norm are finite; a bad step is either dropped (action = "skip") or ends the run
// with a clear error (action = "abort"). Too many skips in a row also end the run, since a
// diverged model will not recover on its own.
#include <loom/hook.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace {

class NanGuard final : public loom::Hook {
 public:
  static constexpr const char* name = "nan_guard";
  static constexpr const char* summary =
      "Skips, rolls back or aborts optimizer steps whose loss or grad norm is NaN/Inf.";
  static constexpr loom_option_spec options[] = {
      loom::option("action", LOOM_OPTION_TYPE_STRING, "skip",
                   "\"skip\" drops the bad step's update; \"rollback\" also restores the newest checkpoint "
                   "and goes on with new data; \"abort\" ends the run with an error."),
      loom::option("max_consecutive_skips", LOOM_OPTION_TYPE_INT, "20",
                   "Abort once this many steps in a row were skipped; 0 = never abort."),
  };

  NanGuard(const loom::Config& c, const loom::Context& ctx)
      : max_skips_(c.i64("max_consecutive_skips")), rank_(ctx.rank) {
    const std::string action = c.str("action");
    if (action != "skip" && action != "rollback" && action != "abort")
      throw loom::Error("nan_guard: action must be \"skip\", \"rollback\" or \"abort\", got \"" + action + "\"");
    abort_ = action == "abort";
    rollback_ = action == "rollback";
    if (max_skips_ < 0)
      throw loom::Error("nan_guard: max_consecutive_skips must be >= 0 (0 = never abort), got " +
                        std::to_string(max_skips_));
  }

  // Every step's loss and grad_norm, before the update: each step waits for the device.
  bool reads_step_values() const override { return true; }

  void on_event(loom_event event, const loom_state_view& s, loom_control& control) override {
    if (event != LOOM_EVENT_BEFORE_OPTIMIZER_STEP) return;
    // loss and grad_norm are global here (grad_norm after the all-reduce), so every rank
    // reaches the same verdict and the replicas stay identical.
    if (std::isfinite(s.loss) && std::isfinite(s.grad_norm)) {
      consecutive_ = 0;
      return;
    }
    const std::string what = describe(s);
    if (abort_)
      throw loom::Error("nan_guard: " + what + "; set [[hooks]] action = \"skip\" to drop such steps instead");
    ++consecutive_;
    if (max_skips_ > 0 && consecutive_ >= max_skips_)
      throw loom::Error("nan_guard: " + std::to_string(consecutive_) + " steps in a row skipped, last: " +
                        what + "; training has diverged: lower the learning rate or set " +
                        "run.clip_grad_norm, or raise max_consecutive_skips (0 = never abort)");
    control.skip_step = 1;
    if (rollback_ && LOOM_STRUCT_HAS(&control, loom_control, request_rollback)) control.request_rollback = 1;
    if (rank_ == 0)
      loom::log(LOOM_LOG_LEVEL_WARN, name,
                std::string(rollback_ ? "rolling back: " : "skipping the update: ") + what + " (" +
                    std::to_string(consecutive_) + " in a row)");
  }

 private:
  static std::string describe(const loom_state_view& s) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "non-finite loss=%g grad_norm=%g at step %lld", s.loss, s.grad_norm,
                  static_cast<long long>(s.step + 1));  // s.step counts completed steps
    return buf;
  }

  int64_t max_skips_;
  int32_t rank_;
  bool abort_ = false;
  bool rollback_ = false;
  int64_t consecutive_ = 0;
};

}  // namespace

LOOM_PLUGIN("nan_guard", "0.1.0", loom::component<NanGuard>())
