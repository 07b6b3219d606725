// events.hpp: delivers hook events in manifest order and merges their control requests.
#pragma once

#include <loom/hook.h>

#include <vector>

#include "abi/observer_components.hpp"

namespace loom {

// Requests from several hooks or events add up: a request set anywhere stays set.
void merge_control(loom_control& into, const loom_control& from);

class EventBus {
 public:
  explicit EventBus(std::vector<HookInstance>& hooks) : hooks_(hooks) {}
  // Runs every hook; a request set by any hook stays set.
  loom_control fire(loom_event event, const loom_state_view& state);
  // Best effort on the way out of a failed run: errors from hooks here are logged, not thrown.
  void fire_exception(loom_state_view state, const char* message) noexcept;

 private:
  std::vector<HookInstance>& hooks_;
};

}  // namespace loom
