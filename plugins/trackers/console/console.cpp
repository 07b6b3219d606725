// console.cpp: the `console` tracker, the live progress line. On a terminal it redraws one
// line on stderr (step, bar, loss, lr, tok/s, step time, ETA) at every log call and, between
// them, four times a second from a ticker thread, which moves the step (marked "~": estimated
// from the step time), the bar and the ETA on, so a long log_every never freezes the line.
// Otherwise, e.g. under a batch scheduler writing to a file, it prints one plain line per log
// call. Only rank 0 prints.
#include <loom/tracker.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

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
        live_(!c.flag("force_plain") && isatty(fileno(stderr))) {
    if (enabled_ && live_) ticker_ = std::thread([this] { tick(); });
  }

  ~Console() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (ticker_.joinable()) ticker_.join();
    if (drawn_) std::fputs("\n", stderr);  // keep the last progress line on screen
  }

  void log(int64_t step, const Metrics& metrics) override {
    if (!enabled_) return;
    Shown s;
    s.step = step;
    for (const loom::Metric& m : metrics) {
      const std::string n = m.name ? m.name : "";
      if (n == "loss") s.loss = m.value;
      else if (n == "lr") s.lr = m.value;
      else if (n == "grad_norm") s.gnorm = m.value;
      else if (n == "tokens_per_s") s.tps = m.value;
      else if (n == "step_time_ms") s.step_ms = m.value;
      else if (n == "data_time_ms") s.data_ms = m.value;
      else if (n == "eta_s") s.eta = m.value;
      else if (n == "mfu") s.mfu = m.value;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    shown_ = s;
    logged_at_ = Clock::now();
    draw(s, /*estimated=*/false);
  }

 private:
  using Clock = std::chrono::steady_clock;

  // What the last log call said.
  struct Shown {
    int64_t step = 0;
    std::optional<double> loss, lr, gnorm, tps, step_ms, data_ms, eta, mfu;  // any may be absent
  };

  void draw(const Shown& s, bool estimated) {
    std::string line = total_ > 0 ? fmt("step %s%lld/%lld", estimated ? "~" : "", (long long)s.step, (long long)total_)
                                  : fmt("step %s%lld", estimated ? "~" : "", (long long)s.step);
    if (live_ && total_ > 0) line += " " + bar(double(s.step) / double(total_));
    if (s.loss) line += fmt(" loss %.4f", *s.loss);  // a NaN loss prints as "nan": worth seeing
    if (s.lr) line += fmt(" lr %.2e", *s.lr);
    if (s.gnorm && !live_) line += fmt(" grad_norm %.3f", *s.gnorm);
    if (s.tps && std::isfinite(*s.tps)) line += " tok/s " + rate(*s.tps);
    if (s.mfu && std::isfinite(*s.mfu)) line += fmt(" mfu %.1f%%", 100.0 * *s.mfu);
    if (s.step_ms) line += fmt(" step %.1fms", *s.step_ms);
    if (s.data_ms && !live_) line += fmt(" data %.1fms", *s.data_ms);
    if (s.eta && std::isfinite(*s.eta)) line += " eta " + hms(*s.eta);
    if (live_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      drawn_ = true;
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }

  // Between log calls: the step the run has probably reached (the last one plus the time
  // since, at the last step time; never past the end), and the ETA counted down.
  void tick() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; })) {
      if (!logged_at_ || !shown_.step_ms || !(*shown_.step_ms > 0)) continue;
      const double since_ms = std::chrono::duration<double, std::milli>(Clock::now() - *logged_at_).count();
      Shown s = shown_;
      const int64_t ahead = static_cast<int64_t>(since_ms / *s.step_ms);
      if (ahead <= 0) continue;
      s.step = total_ > 0 ? std::min<int64_t>(total_, s.step + ahead) : s.step + ahead;
      if (s.eta) s.eta = std::max(0.0, *s.eta - since_ms / 1e3);
      draw(s, /*estimated=*/true);
    }
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
  std::mutex mutex_;  // log calls and the ticker take turns drawing
  std::condition_variable wake_;
  bool stopping_ = false;
  Shown shown_;
  std::optional<Clock::time_point> logged_at_;
  std::thread ticker_;
};

}  // namespace

LOOM_PLUGIN("console", "0.1.0", loom::component<Console>())
