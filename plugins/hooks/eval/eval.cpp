// eval.cpp: the `eval` hook. It decides when the host evaluates the model on [eval_data]:
// every `every` steps, with at_end after the last step, and with at_epoch_end after every
// epoch (a window of a streaming dataset such as criteo_tsv: train_and_evaluate). The evaluation itself is the
// host's (no gradients, the same [eval_data] max_batches batches every time); it reports
// eval_loss and eval_ppl to the trackers and fires EVAL_END. Without an [eval_data] table the
// requests are ignored by the host.
#include <loom/hook.hpp>

#include <string>

namespace {

class Eval final : public loom::Hook {
 public:
  static constexpr const char* name = "eval";
  static constexpr const char* summary = "Evaluates on [eval_data] every N steps and at the end of the run.";
  static constexpr loom_option_spec options[] = {
      loom::option("every", LOOM_OPTION_TYPE_INT, "100", "Evaluate after every this many steps (> 0)."),
      loom::option("at_end", LOOM_OPTION_TYPE_BOOL, "true", "Also evaluate after the last step of the run."),
      loom::option("at_epoch_end", LOOM_OPTION_TYPE_BOOL, "false",
                   "Also evaluate at the end of the step in which an epoch (a streaming dataset's window) ended: "
                   "train_and_evaluate."),
  };

  Eval(const loom::Config& c, const loom::Context&)
      : every_(c.i64("every")), at_end_(c.flag("at_end")), at_epoch_end_(c.flag("at_epoch_end")) {
    if (every_ <= 0) throw loom::Error("eval: every must be > 0, got " + std::to_string(every_));
  }

  bool reads_step_values() const override { return false; }  // the step number only

  void on_event(loom_event event, const loom_state_view& s, loom_control& control) override {
    if (event == LOOM_EVENT_EPOCH_END && at_epoch_end_) control.request_eval = 1;
    if (event != LOOM_EVENT_STEP_END) return;
    // At STEP_END, s.step already counts the step that just ended (1-based step number).
    if (s.step % every_ == 0 || (at_end_ && s.step == s.total_steps)) control.request_eval = 1;
  }

 private:
  int64_t every_;
  bool at_end_;
  bool at_epoch_end_;
};

}  // namespace

LOOM_PLUGIN("eval", "0.1.0", loom::component<Eval>())
