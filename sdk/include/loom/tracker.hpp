// loom/tracker.hpp: derive from loom::Tracker to write an experiment tracker (torch-free).
//
//   struct Stdout final : loom::Tracker {
//     static constexpr const char* name = "stdout";
//     static constexpr const char* summary = "Prints every metric.";
//     Stdout(const loom::Config&, const loom::Context&) {}
//     void log(int64_t step, const Metrics& metrics) override {
//       for (auto& m : metrics) std::printf("%lld %s=%g\n", (long long)step, m.name, m.value);
//     }
//   };
#pragma once

#include <string>
#include <vector>

#include <loom/plugin.hpp>

namespace loom {

struct Metric {
  const char* name;  // borrowed for the log call
  double value;
};
using Metrics = std::vector<Metric>;

inline Metrics read_metrics(const loom_metrics& in) {
  Metrics out;
  out.reserve(in.count);
  for (size_t i = 0; i < in.count; ++i) {
    const loom_metric m = read_in(in.items[i]);
    out.push_back({m.name, m.value});
  }
  return out;
}

class Tracker {
 public:
  using Metrics = loom::Metrics;
  static constexpr loom_kind kind = LOOM_KIND_TRACKER;
  template <class T>
  static const void* vtable();

  virtual ~Tracker() = default;
  virtual void log(int64_t step, const Metrics& metrics) = 0;
  virtual void note(const char* text) { (void)text; }
  // The run resumed at `step`: drop or supersede anything recorded for later steps.
  virtual void resume(int64_t step) { (void)step; }
  // State kept in checkpoints; the default keeps none.
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string& state) { (void)state; }
};


template <class T>
const void* Tracker::vtable() {
  static const loom_tracker_vtable vt = {
      sizeof(loom_tracker_vtable),
      [](const loom_context* c, const loom_config* cfg, loom_tracker** out) {
        return detail::create<Tracker, T>(c, cfg, out);
      },
      &detail::destroy<Tracker, loom_tracker>,
      [](loom_tracker* t, const loom_metrics* in) {
        return guard([&] {
          const loom_metrics m = read_in(in);
          detail::self<Tracker>(t).log(m.step, read_metrics(m));
        });
      },
      [](loom_tracker* t, const char* text) {
        return guard([&] { detail::self<Tracker>(t).note(text); });
      },
      [](loom_tracker* t, int64_t step) { return guard([&] { detail::self<Tracker>(t).resume(step); }); },
      &detail::save_state<Tracker, loom_tracker>,
      &detail::load_state<Tracker, loom_tracker>};
  return &vt;
}

}  // namespace loom
