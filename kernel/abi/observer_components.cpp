#include "abi/observer_components.hpp"

#include <spdlog/spdlog.h>

namespace loom {

MetricsView::MetricsView(int64_t step, const MetricList& metrics) {
  items_.reserve(metrics.size());
  for (const auto& [name, value] : metrics) {
    loom_metric item{};
    item.struct_size = sizeof(item);
    item.name = name.c_str();
    item.value = value;
    items_.push_back(item);
  }
  for (const auto& item : items_) pointers_.push_back(&item);
  view_.struct_size = sizeof(view_);
  view_.step = step;
  view_.items = pointers_.data();
  view_.count = pointers_.size();
}

ScheduleInstance::ScheduleInstance(const SlotConfig& slot, const RunContext& run) : Instance(slot, run) { create(); }

double ScheduleInstance::factor(int64_t step) {
  double out = 1.0;
  check(vt_.factor(handle_, step, &out), "factor");
  return out;
}

TrackerInstance::TrackerInstance(const SlotConfig& slot, const RunContext& run)
    : Instance(slot, run), required_(slot.required) {
  create();
}

template <class Call>
void TrackerInstance::guarded(Call&& call) {
  if (disabled_) return;
  try {
    call();
  } catch (const Failure& f) {
    if (required_) throw;
    disabled_ = true;
    spdlog::warn("{}; this tracker is off for the rest of the run (set required = true to make its failures "
                 "end the run)",
                 f.what());
  }
}

void TrackerInstance::log(const MetricsView& metrics) {
  guarded([&] { check(vt_.log(handle_, metrics.get()), "log"); });
}

void TrackerInstance::note(const std::string& text) {
  if (vt_.note != nullptr) guarded([&] { check(vt_.note(handle_, text.c_str()), "note"); });
}

void TrackerInstance::resume(int64_t step) {
  if (vt_.resume != nullptr) guarded([&] { check(vt_.resume(handle_, step), "resume"); });
}

void TrackerInstance::finish(loom_run_outcome outcome, int64_t step, const std::string& message) {
  if (vt_.finish == nullptr) return;
  loom_tracker_finish_args args{};
  args.struct_size = sizeof(args);
  args.outcome = outcome;
  args.step = step;
  args.message = message.c_str();
  guarded([&] { check(vt_.finish(handle_, &args), "finish"); });
}

std::string TrackerInstance::save_state() {
  std::string state;
  guarded([&] { state = save_state_with(vt_.state_save); });
  return state;
}

void TrackerInstance::load_state(const std::string& state) {
  guarded([&] { load_state_with(vt_.state_load, state); });
}

HookInstance::HookInstance(const SlotConfig& slot, const RunContext& run) : Instance(slot, run) { create(); }

void HookInstance::on_event(loom_event event, const loom_state_view& state, loom_control& control) {
  check(vt_.on_event(handle_, event, &state, &control), "on_event");
}

bool HookInstance::reads_step_values() {
  if (vt_.needs == nullptr) return true;
  loom_hook_needs_args args{};
  args.struct_size = sizeof(args);
  args.step_values = 1;
  check(vt_.needs(handle_, &args), "needs");
  return args.step_values != 0;
}

}  // namespace loom
