// recorder: a test hook that writes every event it sees, with the state's step, one per line,
// and sets control requests at chosen steps, so tests can check order, counts and controls.
#include <loom/hook.hpp>

#include <cstdio>
#include <string>

namespace {

const char* event_name(loom_event e) {
  static const char* names[] = {"train_begin", "train_end", "epoch_begin", "epoch_end", "step_begin",
                                "after_backward", "before_optimizer_step", "step_end", "log", "eval_end",
                                "save", "load", "exception"};
  return e >= 0 && e < LOOM_EVENT_COUNT_ ? names[e] : "unknown";
}

class Recorder final : public loom::Hook {
 public:
  static constexpr const char* name = "recorder";
  static constexpr const char* summary = "Test hook: records events and requests controls at chosen steps.";
  static constexpr loom_option_spec options[] = {
      loom::option("path", LOOM_OPTION_TYPE_STRING, "events.txt", "File in the run directory."),
      loom::option("eval_every", LOOM_OPTION_TYPE_INT, "0", "Request evaluation after every N-th step."),
      loom::option("save_at", LOOM_OPTION_TYPE_INT, "0", "Request a checkpoint after this step."),
      loom::option("skip_at", LOOM_OPTION_TYPE_INT, "0", "Skip the optimizer update of this step."),
      loom::option("stop_at", LOOM_OPTION_TYPE_INT, "0", "Request a stop after this step."),
      loom::option("rollback_at", LOOM_OPTION_TYPE_INT, "0", "Request a rollback after this step (once)."),
      loom::option("epochs", LOOM_OPTION_TYPE_BOOL, "false", "Write the state's epoch after the step."),
      loom::option("values", LOOM_OPTION_TYPE_BOOL, "false", "Write the state's loss and grad_norm after the step."),
      loom::option("reads_step_values", LOOM_OPTION_TYPE_BOOL, "true",
                   "What the hook tells the host (loom_hook_needs_args.step_values)."),
  };

  Recorder(const loom::Config& c, const loom::Context& ctx)
      : eval_every_(c.i64("eval_every")), save_at_(c.i64("save_at")), skip_at_(c.i64("skip_at")),
        stop_at_(c.i64("stop_at")), rollback_at_(c.i64("rollback_at")), epochs_(c.flag("epochs")),
        values_(c.flag("values")), reads_step_values_(c.flag("reads_step_values")) {
    file_ = std::fopen((ctx.run_dir + "/" + c.str("path")).c_str(), "a");
    if (!file_) throw loom::Error("recorder: cannot open " + c.str("path"));
  }
  ~Recorder() override { std::fclose(file_); }
  bool reads_step_values() const override { return reads_step_values_; }

  void on_event(loom_event e, const loom_state_view& s, loom_control& control) override {
    if (epochs_) std::fprintf(file_, "%s %lld %lld\n", event_name(e), static_cast<long long>(s.step),
                              static_cast<long long>(s.epoch));
    else if (values_) std::fprintf(file_, "%s %lld %.17g %.17g\n", event_name(e), static_cast<long long>(s.step), s.loss,
                                   s.grad_norm);
    else std::fprintf(file_, "%s %lld\n", event_name(e), static_cast<long long>(s.step));
    std::fflush(file_);
    const int64_t running = s.step + 1;  // the step a STEP_BEGIN..BEFORE_OPTIMIZER_STEP event belongs to
    if (e == LOOM_EVENT_BEFORE_OPTIMIZER_STEP && running == skip_at_) control.skip_step = 1;
    if (e == LOOM_EVENT_STEP_END) {
      if (eval_every_ > 0 && s.step % eval_every_ == 0) control.request_eval = 1;
      if (s.step == save_at_) control.request_save = 1;
      if (s.step == stop_at_) control.request_stop = 1;
      if (s.step == rollback_at_ && !rolled_back_) control.request_rollback = rolled_back_ = 1;
    }
  }

 private:
  int64_t eval_every_, save_at_, skip_at_, stop_at_, rollback_at_;
  bool epochs_, values_, reads_step_values_;
  int32_t rolled_back_ = 0;
  std::FILE* file_;
};

}  // namespace

LOOM_PLUGIN("recorder", "0.1.0", loom::component<Recorder>())
