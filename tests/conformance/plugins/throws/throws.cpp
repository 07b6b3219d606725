// throws.cpp: components written with the C++ SDK helpers whose callbacks throw.
//   - throwing_tracker: log() throws std::runtime_error once step >= at_step.
//   - throwing_hook: on_event() throws a non-std exception (an int) at step_end of at_step.
// Proves rule 4: no C++ exception crosses the C boundary. The SDK's guard turns each into a
// host-created status, and the host ends the run with exit code 1 and ONE "error:" line that
// names the plugin file, the component and the exception's message; never std::terminate.
#include <loom/hook.hpp>
#include <loom/tracker.hpp>

#include <stdexcept>
#include <string>

namespace {

class ThrowingTracker final : public loom::Tracker {
 public:
  static constexpr const char* name = "throwing_tracker";
  static constexpr const char* summary = "Conformance: log() throws std::runtime_error.";
  static constexpr loom_option_spec options[] = {
      loom::option("at_step", LOOM_OPTION_TYPE_INT, "2", "First step whose log call throws."),
  };

  ThrowingTracker(const loom::Config& c, const loom::Context&) : at_step_(c.i64("at_step")) {}
  void log(int64_t step, const Metrics&) override {
    if (step >= at_step_)
      throw std::runtime_error("throwing_tracker exploded at step " + std::to_string(step));
  }

 private:
  int64_t at_step_;
};

class ThrowingHook final : public loom::Hook {
 public:
  static constexpr const char* name = "throwing_hook";
  static constexpr const char* summary = "Conformance: on_event() throws an int.";
  static constexpr loom_option_spec options[] = {
      loom::option("at_step", LOOM_OPTION_TYPE_INT, "2", "Step whose step_end throws."),
  };

  ThrowingHook(const loom::Config& c, const loom::Context&) : at_step_(c.i64("at_step")) {}
  void on_event(loom_event event, const loom_state_view& state, loom_control&) override {
    if (event == LOOM_EVENT_STEP_END && state.step == at_step_) throw 42;  // not a std::exception
  }

 private:
  int64_t at_step_;
};

}  // namespace

LOOM_PLUGIN("throws", "0.1.0", loom::component<ThrowingTracker>(), loom::component<ThrowingHook>())
