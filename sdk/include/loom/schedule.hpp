// loom/schedule.hpp: derive from loom::Schedule to write a learning-rate schedule (torch-free).
//
//   struct Halving final : loom::Schedule {
//     static constexpr const char* name = "halving";
//     static constexpr const char* summary = "Halves the learning rate every 100 steps.";
//     Halving(const loom::Config&, const loom::Context&) {}
//     double factor(int64_t step) override { return std::pow(0.5, (step - 1) / 100); }
//   };
#pragma once

#include <loom/plugin.hpp>

namespace loom {

class Schedule {
 public:
  static constexpr loom_kind kind = LOOM_KIND_SCHEDULE;
  template <class T>
  static const void* vtable();

  virtual ~Schedule() = default;
  // The factor applied to the optimizer's lr at 1-based optimizer step `step`.
  virtual double factor(int64_t step) = 0;
};

template <class T>
const void* Schedule::vtable() {
  static const loom_schedule_vtable vt = {
      sizeof(loom_schedule_vtable),
      [](const loom_context* c, const loom_config* cfg, loom_schedule** out) {
        return detail::create<Schedule, T>(c, cfg, out);
      },
      &detail::destroy<Schedule, loom_schedule>,
      [](loom_schedule* s, int64_t step, double* out) {
        return guard([&] { *out = detail::self<Schedule>(s).factor(step); });
      }};
  return &vt;
}

}  // namespace loom
