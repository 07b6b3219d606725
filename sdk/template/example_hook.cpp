// example_hook: a training hook in C++ (torch-free).
//
// Remembers the lowest step loss, logs it when training ends, and stops the run early once the
// loss falls below `stop_below`. Its best loss is kept in checkpoints, so a resumed run
// remembers it. The C++ helpers in <loom/hook.hpp> build the C vtable from this class and turn
// any exception into a status: throw loom::Error for a bad option, never let one escape.
#include <loom/hook.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace {

class ExampleHook final : public loom::Hook {
 public:
  static constexpr const char* name = "example_hook";
  static constexpr const char* summary = "Logs the best loss at the end; stops the run below `stop_below`.";
  static constexpr loom_option_spec options[] = {
      loom::option("stop_below", LOOM_OPTION_TYPE_FLOAT, "0.0",
                   "Stop the run once a step's loss is below this; 0 never stops."),
  };

  // The config is valid only during construction: copy what you keep.
  ExampleHook(const loom::Config& config, const loom::Context& context)
      : stop_below_(config.f64("stop_below")), rank_(context.rank) {
    if (!(stop_below_ >= 0.0))  // also rejects NaN; INVALID_ARGUMENT makes the host exit 2
      throw loom::Error("example_hook: stop_below must be >= 0, got " + std::to_string(stop_below_));
  }

  // Called at every event, in manifest order with the other hooks. state is read-only;
  // control steers the run (request_stop, request_save, skip_step, request_eval).
  void on_event(loom_event event, const loom_state_view& state, loom_control& control) override {
    if (event == LOOM_EVENT_STEP_END && std::isfinite(state.loss)) {
      if (state.loss < best_loss_) {
        best_loss_ = state.loss;
        best_step_ = state.step;
      }
      if (state.loss < stop_below_) control.request_stop = 1;
    } else if (event == LOOM_EVENT_TRAIN_END && rank_ == 0) {
      loom::log(LOOM_LOG_LEVEL_INFO, name,
                "best loss " + std::to_string(best_loss_) + " at step " + std::to_string(best_step_));
    }
  }

  // Optional: bytes stored in checkpoints and handed back on resume.
  std::string save_state() const override {
    std::ostringstream out;
    out.precision(17);
    out << best_loss_ << ' ' << best_step_;
    return out.str();
  }
  void load_state(const std::string& state) override { std::istringstream(state) >> best_loss_ >> best_step_; }

 private:
  double stop_below_;
  int32_t rank_;
  double best_loss_ = std::numeric_limits<double>::infinity();
  int64_t best_step_ = 0;
};

}  // namespace

// Exports loom_plugin_init: plugin name, plugin version, then its components.
LOOM_PLUGIN("example_hook", "0.1.0", loom::component<ExampleHook>())
