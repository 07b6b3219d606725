// console.cpp: the `console` tracker, the live progress line. On a terminal it redraws one
// line on stderr (step, bar, loss, lr, tok/s, step time, ETA); otherwise, e.g. under a batch
// scheduler writing to a file, it prints one plain line per log call. Only rank 0 prints.
#include <loom/tracker.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>

namespace {

// printf into a std::string; the helper keeps the formatting below one line per field.
std::string fmt(const char* format, ...) {
  char buf[128];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

std::string rate(double v) {  // 51234 -> "51.2k"
  if (v >= 1e6) return fmt("%.1fM", v / 1e6);
  if (v >= 1e3) return fmt("%.1fk", v / 1e3);
  return fmt("%.1f", v);
}

std::string hms(double seconds) {  // 3725 -> "1:02:05"
  const double clamped = seconds < 0 ? 0 : seconds > 1e9 ? 1e9 : seconds;  // no overflow below
  const long long s = static_cast<long long>(clamped + 0.5);
  return fmt("%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

class Console final : public loom::Tracker {
 public:
  static constexpr const char* name = "console";
  static constexpr const char* summary = "Live progress line on stderr (plain lines when not a terminal).";
  static constexpr loom_option_spec options[] = {
      loom::option("force_plain", LOOM_OPTION_TYPE_BOOL, "false",
                   "Print one plain line per log even on a terminal."),
  };

  Console(const loom::Config& c, const loom::Context& ctx)
      : enabled_(ctx.rank == 0), total_(ctx.total_steps),
        live_(!c.flag("force_plain") && isatty(fileno(stderr))) {}

  ~Console() override {
    if (drawn_) std::fputs("\n", stderr);  // keep the last progress line on screen
  }

  void log(int64_t step, const Metrics& metrics) override {
    if (!enabled_) return;
    std::optional<double> loss, lr, gnorm, tps, step_ms, data_ms, eta, mfu;  // any may be absent
    for (const loom::Metric& m : metrics) {
      const std::string n = m.name ? m.name : "";
      if (n == "loss") loss = m.value;
      else if (n == "lr") lr = m.value;
      else if (n == "grad_norm") gnorm = m.value;
      else if (n == "tokens_per_s") tps = m.value;
      else if (n == "step_time_ms") step_ms = m.value;
      else if (n == "data_time_ms") data_ms = m.value;
      else if (n == "eta_s") eta = m.value;
      else if (n == "mfu") mfu = m.value;
    }
    std::string line = total_ > 0 ? fmt("step %lld/%lld", (long long)step, (long long)total_)
                                  : fmt("step %lld", (long long)step);
    if (live_ && total_ > 0) line += " " + bar(double(step) / double(total_));
    if (loss) line += fmt(" loss %.4f", *loss);  // a NaN loss prints as "nan": worth seeing
    if (lr) line += fmt(" lr %.2e", *lr);
    if (gnorm && !live_) line += fmt(" grad_norm %.3f", *gnorm);
    if (tps && std::isfinite(*tps)) line += " tok/s " + rate(*tps);
    if (mfu && std::isfinite(*mfu)) line += fmt(" mfu %.1f%%", 100.0 * *mfu);
    if (step_ms) line += fmt(" step %.1fms", *step_ms);
    if (data_ms && !live_) line += fmt(" data %.1fms", *data_ms);
    if (eta && std::isfinite(*eta)) line += " eta " + hms(*eta);
    if (live_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      drawn_ = true;
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }

 private:
  static std::string bar(double fraction) {
    constexpr int kWidth = 20;
    const double f = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
    const int filled = static_cast<int>(f * kWidth + 0.5);
    return "[" + std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '-') + "]";
  }

  bool enabled_;
  int64_t total_;
  bool live_;
  bool drawn_ = false;
};

}  // namespace

LOOM_PLUGIN("console", "0.1.0", loom::component<Console>())
