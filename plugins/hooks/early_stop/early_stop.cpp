// early_stop.cpp: the `early_stop` hook. It watches one metric and asks the host to stop the
// run gracefully (final checkpoint, trackers closed) once the metric has not improved for
// `patience` observations in a row.
//
// An observation is an event whose metrics hold the metric: EVAL_END for evaluation metrics
// (eval_loss, eval_ppl: add the `eval` hook and an [eval_data] table), LOG for training
// metrics (loss, grad_norm, ...: every run.log_every steps). Each step counts at most once,
// even if both events carry the metric. A NaN value never improves.
//
// The best value and the counter live in checkpoints, so a resumed run stops exactly where an
// uninterrupted one would. The state is a short versioned text (see save_state).
#include <loom/hook.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

namespace {

constexpr const char* kStateMagic = "loom-early_stop 1";

class EarlyStop final : public loom::Hook {
 public:
  static constexpr const char* name = "early_stop";
  static constexpr const char* summary = "Stops the run when a metric has not improved for `patience` evaluations.";
  static constexpr loom_option_spec options[] = {
      loom::option("metric", LOOM_OPTION_TYPE_STRING, "eval_loss",
                   "Metric to watch: from EVAL_END (eval_loss, eval_ppl) or LOG (loss, ...)."),
      loom::option("mode", LOOM_OPTION_TYPE_STRING, "min", "\"min\": lower is better; \"max\": higher is better."),
      loom::option("patience", LOOM_OPTION_TYPE_INT, "3", "Stop after this many observations without improvement (>= 1)."),
      loom::option("min_delta", LOOM_OPTION_TYPE_FLOAT, "0.0", "An improvement must beat the best by more than this (>= 0)."),
  };

  EarlyStop(const loom::Config& c, const loom::Context& ctx)
      : metric_(c.str("metric")), patience_(c.i64("patience")), min_delta_(c.f64("min_delta")), rank_(ctx.rank) {
    const std::string mode = c.str("mode");
    if (mode != "min" && mode != "max")
      throw loom::Error("early_stop: mode must be \"min\" or \"max\", got \"" + mode + "\"");
    maximize_ = mode == "max";
    if (metric_.empty()) throw loom::Error("early_stop: metric must name a metric, such as \"eval_loss\"");
    if (patience_ < 1) throw loom::Error("early_stop: patience must be >= 1, got " + std::to_string(patience_));
    if (!(min_delta_ >= 0)) throw loom::Error("early_stop: min_delta must be >= 0, got " + std::to_string(min_delta_));
  }

  bool reads_step_values() const override { return false; }  // metrics from LOG and EVAL_END only

  void on_event(loom_event event, const loom_state_view& s, loom_control& control) override {
    if ((event != LOOM_EVENT_EVAL_END && event != LOOM_EVENT_LOG) || s.metrics == nullptr) return;
    const loom_metrics metrics = loom::read_in(s.metrics);
    double value = 0;
    if (!find(metrics, value) || metrics.step <= last_step_) return;
    last_step_ = metrics.step;
    if (improves(value)) {
      has_best_ = true;
      best_ = value;
      best_step_ = metrics.step;
      stale_ = 0;
      return;
    }
    if (++stale_ < patience_) return;
    control.request_stop = 1;
    if (rank_ == 0 && !announced_) loom::log(LOOM_LOG_LEVEL_INFO, name, why(metrics.step, value));
    announced_ = true;
  }

  // Text, one "key value" per line after a magic line; doubles in hex so they round-trip.
  std::string save_state() const override {
    char best[64];
    std::snprintf(best, sizeof best, "%a", best_);
    std::ostringstream out;
    out << kStateMagic << "\nmetric " << metric_ << "\nmode " << (maximize_ ? "max" : "min")
        << "\nhas_best " << (has_best_ ? 1 : 0) << "\nbest " << best << "\nbest_step " << best_step_
        << "\nstale " << stale_ << "\nlast_step " << last_step_ << "\n";
    return out.str();
  }

  void load_state(const std::string& state) override {
    if (state.empty()) return;  // the checkpoint predates this hook: start fresh
    std::istringstream in(state);
    std::string line;
    if (!std::getline(in, line) || line != kStateMagic)
      throw loom::Error("early_stop: the checkpoint's early_stop state does not start with \"" +
                        std::string(kStateMagic) + "\": it is damaged or was written by an incompatible "
                        "early_stop; resume from another checkpoint or start a new run directory");
    std::map<std::string, std::string> fields;
    while (std::getline(in, line)) {
      const size_t space = line.find(' ');
      if (space == std::string::npos) throw bad_state("line \"" + line + "\" has no value");
      fields[line.substr(0, space)] = line.substr(space + 1);
    }
    const std::string metric = field(fields, "metric"), mode = field(fields, "mode");
    const bool has_best = integer(fields, "has_best") != 0;
    const double best = real(fields, "best");
    const int64_t best_step = integer(fields, "best_step"), stale = integer(fields, "stale"),
                  last_step = integer(fields, "last_step");
    if (metric != metric_ || mode != (maximize_ ? "max" : "min")) {
      if (rank_ == 0)
        loom::log(LOOM_LOG_LEVEL_WARN, name,
                  "the checkpoint watched " + metric + " (" + mode + "); now watching " + metric_ + " (" +
                      (maximize_ ? "max" : "min") + "): starting with no best value");
      last_step_ = last_step;
      return;
    }
    has_best_ = has_best;
    best_ = best;
    best_step_ = best_step;
    stale_ = stale;
    last_step_ = last_step;
  }

 private:
  bool find(const loom_metrics& metrics, double& value) const {
    for (size_t i = 0; i < metrics.count; ++i) {
      const loom_metric m = loom::read_in(metrics.items[i]);
      if (m.name != nullptr && metric_ == m.name) {
        value = m.value;
        return true;
      }
    }
    return false;
  }

  bool improves(double value) const {
    if (std::isnan(value)) return false;
    if (!has_best_) return true;
    return maximize_ ? value > best_ + min_delta_ : value < best_ - min_delta_;
  }

  std::string why(int64_t step, double value) const {
    char buf[384];
    if (has_best_)
      std::snprintf(buf, sizeof buf,
                    "%s has not improved for %lld observation%s (best %g at step %lld, now %g; mode %s, "
                    "min_delta %g): stopping after step %lld",
                    metric_.c_str(), static_cast<long long>(stale_), stale_ == 1 ? "" : "s", best_,
                    static_cast<long long>(best_step_), value, maximize_ ? "max" : "min", min_delta_,
                    static_cast<long long>(step));
    else
      std::snprintf(buf, sizeof buf, "%s has been NaN for %lld observation%s: stopping after step %lld",
                    metric_.c_str(), static_cast<long long>(stale_), stale_ == 1 ? "" : "s",
                    static_cast<long long>(step));
    return buf;
  }

  static loom::Error bad_state(const std::string& what) {
    return loom::Error("early_stop: corrupt hook state in the checkpoint: " + what);
  }
  static const std::string& field(const std::map<std::string, std::string>& fields, const char* key) {
    const auto it = fields.find(key);
    if (it == fields.end()) throw bad_state(std::string("missing \"") + key + "\"");
    return it->second;
  }
  static int64_t integer(const std::map<std::string, std::string>& fields, const char* key) {
    const std::string& text = field(fields, key);
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') throw bad_state(std::string(key) + " \"" + text + "\" is not an integer");
    return v;
  }
  static double real(const std::map<std::string, std::string>& fields, const char* key) {
    const std::string& text = field(fields, key);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') throw bad_state(std::string(key) + " \"" + text + "\" is not a number");
    return v;
  }

  std::string metric_;
  int64_t patience_;
  double min_delta_;
  int32_t rank_;
  bool maximize_ = false;
  bool has_best_ = false;
  double best_ = 0;
  int64_t best_step_ = 0;
  int64_t stale_ = 0;       // observations in a row without improvement
  int64_t last_step_ = -1;  // step of the last observation, so a step counts once
  bool announced_ = false;
};

}  // namespace

LOOM_PLUGIN("early_stop", "0.1.0", loom::component<EarlyStop>())
