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
  // A line of text for humans. A tracker that does not override it has no note callback.
  virtual void note(const char* text) { (void)text; }
  // The run resumed at `step`: drop or supersede anything recorded for later steps. A tracker
  // that does not override it has no resume callback.
  virtual void resume(int64_t step) { (void)step; }
  // State kept in checkpoints: override both or neither. A tracker that overrides neither gets
  // no state callbacks and has no entry in checkpoints.
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string& state) { (void)state; }
  // The run ended (ABI 1.6): outcome is a loom_run_outcome, message says why a run failed.
  // Called once before destruction, never when the process is killed.
  virtual void finish(loom_run_outcome outcome, int64_t step, const std::string& message) {
    (void)outcome, (void)step, (void)message;
  }
};

namespace detail {
LOOM_DETAIL_MEMBER_POINTER(note)
LOOM_DETAIL_MEMBER_POINTER(resume)
LOOM_DETAIL_MEMBER_POINTER(finish)
}  // namespace detail

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
      // note and resume only when T overrides them: a resume callback promises to drop records.
      detail::overridden<typename detail::note_pointer<T>::type, void (Tracker::*)(const char*)>
          ? +[](loom_tracker* t, const char* text) { return guard([&] { detail::self<Tracker>(t).note(text); }); }
          : nullptr,
      detail::overridden<typename detail::resume_pointer<T>::type, void (Tracker::*)(int64_t)>
          ? +[](loom_tracker* t, int64_t step) { return guard([&] { detail::self<Tracker>(t).resume(step); }); }
          : nullptr,
      detail::state_callbacks<T, Tracker, loom_tracker>::save,
      detail::state_callbacks<T, Tracker, loom_tracker>::load,
      detail::overridden<typename detail::finish_pointer<T>::type,
                         void (Tracker::*)(loom_run_outcome, int64_t, const std::string&)>
          ? +[](loom_tracker* t, const loom_tracker_finish_args* in) {
              return guard([&] {
                const loom_tracker_finish_args a = read_in(in);
                detail::self<Tracker>(t).finish(loom_run_outcome(a.outcome), a.step, a.message ? a.message : "");
              });
            }
          : nullptr};
  return &vt;
}

}  // namespace loom
