// observer_components.hpp: host-side owners of the torch-free kinds that watch or steer a run:
// schedules, trackers and hooks.
#pragma once

#include <loom/abi.h>

#include <string>
#include <utility>
#include <vector>

#include "abi/instance.hpp"

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

// Trackers watch; by default a failing one is disabled with a warning and the run goes on
// ([[trackers]] required = true makes its failures end the run).
class TrackerInstance : public Instance<loom_tracker_vtable, loom_tracker> {
 public:
  TrackerInstance(const SlotConfig& slot, const RunContext& run);
  void log(const MetricsView& metrics);
  void note(const std::string& text);
  // The run resumed at step: the tracker drops what it recorded after it.
  void resume(int64_t step);
  // The run ended: FINISHED, INTERRUPTED or FAILED (message says why).
  void finish(loom_run_outcome outcome, int64_t step, const std::string& message);
  bool has_state() const { return vt_.state_save != nullptr && vt_.state_load != nullptr; }
  std::string save_state();
  void load_state(const std::string& state);

 private:
  template <class Call>
  void guarded(Call&& call);
  bool required_ = false;
  bool disabled_ = false;
};

class HookInstance : public Instance<loom_hook_vtable, loom_hook> {
 public:
  HookInstance(const SlotConfig& slot, const RunContext& run);
  void on_event(loom_event event, const loom_state_view& state, loom_control& control);
  // Whether the hook reads every step's loss and grad_norm (loom_hook_needs_args, ABI 1.9);
  // true for a hook built before 1.9, which cannot say.
  bool reads_step_values();
  bool has_state() const { return vt_.state_save != nullptr && vt_.state_load != nullptr; }
  std::string save_state() { return save_state_with(vt_.state_save); }
  void load_state(const std::string& state) { load_state_with(vt_.state_load, state); }
};

}  // namespace loom
