// The real eval and early_stop plugins, loaded the way the host loads them and driven event by
// event through their C vtables: exactly when eval asks for an evaluation, when early_stop
// stops (mode, patience, min_delta, NaN, one count per step), and early_stop's checkpoint
// state (a resumed hook continues where it left off; damaged bytes are refused clearly).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "plugin_state.hpp"
#include "abi/host_api.hpp"
#include "plugin_slots.hpp"
#include "abi/registry.hpp"

namespace {

// One hook instance, created as the host creates it, for a run of total_steps steps.
class PluginHook {
 public:
  PluginHook(const std::string& component, const toml::table& options, int64_t total_steps = 100) {
    const loom::SlotConfig slot = loom_test::plugin_slot(LOOM_KIND_HOOK, "hooks[0]", component, options);
    vt_ = loom::copy_vtable<loom_hook_vtable>(slot.component->vtable);
    config_ = slot.config;
    total_steps_ = total_steps;
    const loom_context context = {sizeof(loom_context), slot_.c_str(), run_dir_.c_str(), 0, 0, 1, device_.c_str(),
                                  total_steps};
    error_ = loom::take_status_message(vt_.create(&context, &config_, &handle_));
  }
  ~PluginHook() { vt_.destroy(handle_); }
  PluginHook(const PluginHook&) = delete;
  PluginHook& operator=(const PluginHook&) = delete;

  const std::string& create_error() const { return error_; }

  // Fires event with state.step = step and, when given, metrics at that step.
  loom_control fire(loom_event event, int64_t step, const std::vector<std::pair<std::string, double>>& metrics = {}) {
    REQUIRE_MESSAGE(handle_ != nullptr, error_);
    std::vector<loom_metric> items;
    for (const auto& [name, value] : metrics) items.push_back({sizeof(loom_metric), name.c_str(), value});
    std::vector<const loom_metric*> pointers;
    for (const auto& m : items) pointers.push_back(&m);
    const loom_metrics view = {sizeof(loom_metrics), step, pointers.data(), pointers.size()};
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const loom_state_view state = {sizeof(loom_state_view), step, total_steps_, 0, nan, nan, 0.0, 0,
                                   metrics.empty() ? nullptr : &view, run_dir_.c_str(), 0, 1, nullptr};
    loom_control control{sizeof(loom_control), 0, 0, 0, 0};
    if (loom_status* s = vt_.on_event(handle_, event, &state, &control))
      FAIL("on_event failed: " << loom::take_status_message(s));
    return control;
  }
  // An evaluation at step: STEP_END, then EVAL_END with eval_loss = value.
  bool evaluate(int64_t step, double eval_loss) {
    fire(LOOM_EVENT_STEP_END, step);
    return fire(LOOM_EVENT_EVAL_END, step, {{"eval_loss", eval_loss}, {"eval_ppl", std::exp(eval_loss)}}).request_stop;
  }

  std::string save() { return loom_test::save_plugin_state(vt_.state_save, handle_); }
  // "" on success, else the error message.
  std::string load(const std::string& state) { return loom_test::load_plugin_state(vt_.state_load, handle_, state); }

 private:
  loom_hook_vtable vt_{};
  loom_config config_;
  std::string slot_ = "hooks[0]", run_dir_ = LOOM_TEST_TMP, device_ = "cpu";
  int64_t total_steps_ = 0;
  loom_hook* handle_ = nullptr;
  std::string error_;
};

// The steps of a run at whose STEP_END the eval hook asks for an evaluation.
std::vector<int64_t> eval_steps(const toml::table& options, int64_t total_steps) {
  PluginHook hook("eval", options, total_steps);
  std::vector<int64_t> out;
  hook.fire(LOOM_EVENT_TRAIN_BEGIN, 0);
  for (int64_t step = 1; step <= total_steps; ++step) {
    CHECK_FALSE(hook.fire(LOOM_EVENT_STEP_BEGIN, step - 1).request_eval);
    CHECK_FALSE(hook.fire(LOOM_EVENT_BEFORE_OPTIMIZER_STEP, step - 1).request_eval);
    if (hook.fire(LOOM_EVENT_STEP_END, step).request_eval) out.push_back(step);
    CHECK_FALSE(hook.fire(LOOM_EVENT_LOG, step, {{"loss", 1.0}}).request_eval);
  }
  return out;
}

}  // namespace

TEST_CASE("eval asks for an evaluation every N steps and after the last step") {
  CHECK(eval_steps(toml::table{{"every", 3}}, 10) == std::vector<int64_t>{3, 6, 9, 10});
  CHECK(eval_steps(toml::table{{"every", 3}, {"at_end", false}}, 10) == std::vector<int64_t>{3, 6, 9});
  CHECK(eval_steps(toml::table{{"every", 5}}, 10) == std::vector<int64_t>{5, 10});  // no double request
  CHECK(eval_steps(toml::table{}, 250) == std::vector<int64_t>{100, 200, 250});       // defaults
}

TEST_CASE("eval refuses every <= 0 naming the option") {
  PluginHook hook("eval", toml::table{{"every", 0}});
  CHECK(hook.create_error().find("every must be > 0") != std::string::npos);
}

TEST_CASE("early_stop (min) stops after `patience` evaluations without improvement, not before") {
  PluginHook hook("early_stop", toml::table{{"patience", 2}});
  CHECK_FALSE(hook.evaluate(10, 3.0));  // first value: the best so far
  CHECK_FALSE(hook.evaluate(20, 2.5));  // improves
  CHECK_FALSE(hook.evaluate(30, 2.6));  // 1 without improvement
  CHECK(hook.evaluate(40, 2.5));        // equal is no improvement: 2 -> stop
}

TEST_CASE("early_stop: an improvement resets the count; min_delta demands a margin; max mode") {
  SUBCASE("reset") {
    PluginHook hook("early_stop", toml::table{{"patience", 2}});
    CHECK_FALSE(hook.evaluate(1, 3.0));
    CHECK_FALSE(hook.evaluate(2, 3.1));
    CHECK_FALSE(hook.evaluate(3, 2.9));  // improves: count back to 0
    CHECK_FALSE(hook.evaluate(4, 3.0));
    CHECK(hook.evaluate(5, 3.0));
  }
  SUBCASE("min_delta") {
    PluginHook hook("early_stop", toml::table{{"patience", 1}, {"min_delta", 0.1}});
    CHECK_FALSE(hook.evaluate(1, 3.0));
    CHECK_FALSE(hook.evaluate(2, 2.85));  // beats 3.0 by more than 0.1
    CHECK(hook.evaluate(3, 2.8));         // beats 2.85 by only 0.05
  }
  SUBCASE("max") {
    PluginHook hook("early_stop", toml::table{{"patience", 1}, {"mode", "max"}, {"metric", "accuracy"}});
    CHECK_FALSE(hook.fire(LOOM_EVENT_EVAL_END, 1, {{"accuracy", 0.5}}).request_stop);
    CHECK_FALSE(hook.fire(LOOM_EVENT_EVAL_END, 2, {{"accuracy", 0.6}}).request_stop);
    CHECK(hook.fire(LOOM_EVENT_EVAL_END, 3, {{"accuracy", 0.55}}).request_stop);
  }
}

TEST_CASE("early_stop: NaN never improves; events without the metric do not count") {
  PluginHook hook("early_stop", toml::table{{"patience", 2}});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(hook.evaluate(1, nan));
  CHECK_FALSE(hook.fire(LOOM_EVENT_LOG, 2, {{"loss", 1.0}}).request_stop);  // no eval_loss here
  CHECK_FALSE(hook.fire(LOOM_EVENT_STEP_END, 3).request_stop);
  CHECK(hook.evaluate(4, nan));
}

TEST_CASE("early_stop watches training metrics through LOG, and counts a step once") {
  PluginHook hook("early_stop", toml::table{{"metric", "loss"}, {"patience", 2}});
  CHECK_FALSE(hook.fire(LOOM_EVENT_LOG, 5, {{"loss", 2.0}, {"lr", 0.1}}).request_stop);
  CHECK_FALSE(hook.fire(LOOM_EVENT_LOG, 10, {{"loss", 2.5}}).request_stop);
  // The same step seen again (e.g. by EVAL_END carrying the metric too) is not a new observation.
  CHECK_FALSE(hook.fire(LOOM_EVENT_EVAL_END, 10, {{"loss", 2.5}}).request_stop);
  CHECK(hook.fire(LOOM_EVENT_LOG, 15, {{"loss", 2.5}}).request_stop);
}

TEST_CASE("early_stop's state resumes exactly: best value and count survive a checkpoint") {
  const toml::table options{{"patience", 3}};
  std::string state;
  {
    PluginHook before("early_stop", options);
    CHECK_FALSE(before.evaluate(10, 2.0));
    CHECK_FALSE(before.evaluate(20, 2.1));
    CHECK_FALSE(before.evaluate(30, 2.2));  // 2 without improvement
    state = before.save();
  }
  REQUIRE_FALSE(state.empty());
  PluginHook resumed("early_stop", options);
  REQUIRE(resumed.load(state) == "");
  CHECK(resumed.save() == state);
  CHECK(resumed.evaluate(40, 2.05));  // the third without improvement: stop

  PluginHook fresh("early_stop", options);  // without the state it would not stop yet
  CHECK_FALSE(fresh.evaluate(40, 2.05));
}

TEST_CASE("early_stop refuses damaged state bytes with a clear error") {
  std::string good;
  {
    PluginHook hook("early_stop", toml::table{});
    hook.evaluate(10, 2.0);
    good = hook.save();
  }
  PluginHook hook("early_stop", toml::table{});
  CHECK(hook.load("") == "");  // no state stored: start fresh
  const std::string not_ours = hook.load("\x93NUMPY garbage");
  CHECK(not_ours.find("early_stop") != std::string::npos);
  CHECK(not_ours.find("loom-early_stop 1") != std::string::npos);
  const std::string truncated = hook.load(good.substr(0, good.find("stale")));
  CHECK(truncated.find("corrupt") != std::string::npos);
  CHECK(truncated.find("missing \"stale\"") != std::string::npos);
  std::string bad_number = good;
  bad_number.replace(bad_number.find("best_step ") + 10, 1, "x");
  CHECK(hook.load(bad_number).find("best_step") != std::string::npos);
  CHECK(hook.load(good) == "");  // the hook still accepts good bytes afterwards
}

TEST_CASE("early_stop refuses bad options") {
  CHECK(PluginHook("early_stop", toml::table{{"mode", "lowest"}}).create_error().find("\"min\" or \"max\"") !=
        std::string::npos);
  CHECK(PluginHook("early_stop", toml::table{{"patience", 0}}).create_error().find("patience must be >= 1") !=
        std::string::npos);
  CHECK(PluginHook("early_stop", toml::table{{"min_delta", -0.5}}).create_error().find("min_delta") !=
        std::string::npos);
}
