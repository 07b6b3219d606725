#include "train/events.hpp"

#include <spdlog/spdlog.h>

namespace loom {
namespace {

loom_control no_requests() {
  loom_control control{};
  control.struct_size = sizeof(control);
  return control;
}

}  // namespace

void merge_control(loom_control& into, const loom_control& from) {
  into.request_stop |= from.request_stop;
  into.request_save |= from.request_save;
  into.skip_step |= from.skip_step;
  into.request_eval |= from.request_eval;
  into.request_rollback |= from.request_rollback;
}

loom_control EventBus::fire(loom_event event, const loom_state_view& state) {
  loom_control merged = no_requests();
  for (auto& hook : hooks_) {
    loom_control control = no_requests();
    hook.on_event(event, state, control);
    merge_control(merged, control);
  }
  return merged;
}

void EventBus::fire_exception(loom_state_view state, const char* message) noexcept {
  state.message = message;
  for (auto& hook : hooks_) {
    try {
      loom_control ignored = no_requests();
      hook.on_event(LOOM_EVENT_EXCEPTION, state, ignored);
    } catch (const std::exception& e) {
      spdlog::warn("{} failed while handling the error: {}", hook.slot(), e.what());
    }
  }
}

}  // namespace loom
