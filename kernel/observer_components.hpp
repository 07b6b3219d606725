// observer_components.hpp: host-side owners of the torch-free kinds that watch or steer a run:
// schedules, trackers and hooks.
#pragma once

#include <loom/abi.h>

#include <string>
#include <utility>
#include <vector>

#include "instance.hpp"

namespace loom {

using MetricList = std::vector<std::pair<std::string, double>>;

// The ABI view of a MetricList; valid while both objects live.
class MetricsView {
 public:
  MetricsView(int64_t step, const MetricList& metrics);
  const loom_metrics* get() const { return &view_; }

 private:
  std::vector<loom_metric> items_;
  std::vector<const loom_metric*> pointers_;
  loom_metrics view_{};
};

class ScheduleInstance : public Instance<loom_schedule_vtable, loom_schedule> {
 public:
  ScheduleInstance(const SlotConfig& slot, const RunContext& run);
  double factor(int64_t step);
};

class TrackerInstance : public Instance<loom_tracker_vtable, loom_tracker> {
 public:
  TrackerInstance(const SlotConfig& slot, const RunContext& run);
  void log(const MetricsView& metrics);
  void note(const std::string& text);
};

class HookInstance : public Instance<loom_hook_vtable, loom_hook> {
 public:
  HookInstance(const SlotConfig& slot, const RunContext& run);
  void on_event(loom_event event, const loom_state_view& state, loom_control& control);
};

}  // namespace loom
