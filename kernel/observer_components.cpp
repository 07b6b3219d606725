#include "observer_components.hpp"

namespace loom {

ScheduleInstance::ScheduleInstance(const SlotConfig& slot, const RunContext& run) : Instance(slot, run) { create(); }

double ScheduleInstance::factor(int64_t step) {
  double out = 1.0;
  check(vt_.factor(handle_, step, &out), "factor");
  return out;
}

TrackerInstance::TrackerInstance(const SlotConfig& slot, const RunContext& run) : Instance(slot, run) { create(); }

MetricsView::MetricsView(int64_t step, const MetricList& metrics) {
  items_.reserve(metrics.size());
  for (const auto& [name, value] : metrics) items_.push_back({sizeof(loom_metric), name.c_str(), value});
  for (const auto& item : items_) pointers_.push_back(&item);
  view_ = {sizeof(loom_metrics), step, pointers_.data(), pointers_.size()};
}

void TrackerInstance::log(const MetricsView& metrics) { check(vt_.log(handle_, metrics.get()), "log"); }

void TrackerInstance::note(const std::string& text) {
  if (vt_.note != nullptr) check(vt_.note(handle_, text.c_str()), "note");
}

HookInstance::HookInstance(const SlotConfig& slot, const RunContext& run) : Instance(slot, run) { create(); }

void HookInstance::on_event(loom_event event, const loom_state_view& state, loom_control& control) {
  check(vt_.on_event(handle_, event, &state, &control), "on_event");
}

}  // namespace loom
