// loom/hook.hpp: derive from loom::Hook to write a training hook (torch-free).
//
//   struct StopAt final : loom::Hook {
//     static constexpr const char* name = "stop_at";
//     static constexpr const char* summary = "Stops the run after a given step.";
//     static constexpr loom_option_spec options[] = {
//         loom::required_option("step", LOOM_OPTION_TYPE_INT, "Last step to run.")};
//     int64_t last;
//     StopAt(const loom::Config& c, const loom::Context&) : last(c.i64("step")) {}
//     void on_event(loom_event e, const loom_state_view& s, loom_control& c) override {
//       if (e == LOOM_EVENT_STEP_END && s.step + 1 >= last) c.request_stop = 1;
//     }
//   };
#pragma once

#include <loom/tracker.hpp>

namespace loom {

class Hook {
 public:
  static constexpr loom_kind kind = LOOM_KIND_HOOK;
  template <class T>
  static const void* vtable();

  virtual ~Hook() = default;
  // state: read-only view (fields the host lacks are zero); control: set fields to steer.
  virtual void on_event(loom_event event, const loom_state_view& state, loom_control& control) = 0;
  // State kept in checkpoints: override both or neither. A hook that overrides neither gets
  // no state callbacks and has no entry in checkpoints.
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string& state) { (void)state; }
  // Whether on_event reads state.loss or state.grad_norm in the events of every step (before
  // LOG). true, the safe default, makes each step wait for the device; a hook that reads them
  // only in LOG, EVAL_END or later, or not at all, returns false (loom_hook_needs_args).
  virtual bool reads_step_values() const { return true; }
};

template <class T>
const void* Hook::vtable() {
  static const loom_hook_vtable vt = {
      sizeof(loom_hook_vtable),
      [](const loom_context* c, const loom_config* cfg, loom_hook** out) {
        return detail::create<Hook, T>(c, cfg, out);
      },
      &detail::destroy<Hook, loom_hook>,
      [](loom_hook* h, loom_event event, const loom_state_view* state, loom_control* control) {
        return guard([&] {
          loom_control local = read_in(control);
          detail::self<Hook>(h).on_event(event, read_in(state), local);
          write_out(control, local);
        });
      },
      detail::state_callbacks<T, Hook, loom_hook>::save,
      detail::state_callbacks<T, Hook, loom_hook>::load,
      [](loom_hook* h, loom_hook_needs_args* args) {
        return guard([&] {
          if (args->struct_size >= offsetof(loom_hook_needs_args, step_values) + sizeof(int32_t))
            args->step_values = detail::self<Hook>(h).reads_step_values() ? 1 : 0;
        });
      }};
  return &vt;
}

}  // namespace loom
