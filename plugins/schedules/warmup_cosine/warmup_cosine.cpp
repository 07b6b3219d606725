// warmup_cosine.cpp: the `warmup_cosine` learning-rate schedule. Linear warmup from 0 to 1
// over warmup_steps, then a half cosine from 1 down to min_factor over decay_steps, then flat.
#include <loom/schedule.hpp>

#include <cmath>
#include <string>

namespace {

constexpr double kPi = 3.14159265358979323846;

class WarmupCosine final : public loom::Schedule {
 public:
  static constexpr const char* name = "warmup_cosine";
  static constexpr const char* summary = "Linear warmup, then cosine decay to min_factor * lr.";
  static constexpr loom_option_spec options[] = {
      loom::option("warmup_steps", LOOM_OPTION_TYPE_INT, "100",
                   "Steps of linear warmup; the factor is step/warmup_steps. 0 disables warmup."),
      loom::option("min_factor", LOOM_OPTION_TYPE_FLOAT, "0.1",
                   "Final factor (0 to 1) reached at the end of the decay and kept afterwards."),
      loom::option("decay_steps", LOOM_OPTION_TYPE_INT, "0",
                   "Steps of cosine decay after warmup; 0 means run.steps - warmup_steps."),
  };

  WarmupCosine(const loom::Config& c, const loom::Context& ctx)
      : warmup_(c.i64("warmup_steps")), min_(c.f64("min_factor")), decay_(c.i64("decay_steps")) {
    if (warmup_ < 0)
      throw loom::Error("warmup_cosine: warmup_steps must be >= 0, got " + std::to_string(warmup_));
    if (!(min_ >= 0.0 && min_ <= 1.0))
      throw loom::Error("warmup_cosine: min_factor must be in [0, 1], got " + std::to_string(min_));
    if (decay_ < 0)
      throw loom::Error("warmup_cosine: decay_steps must be >= 0 (0 = until run.steps), got " +
                        std::to_string(decay_));
    if (decay_ == 0) {
      if (ctx.total_steps <= 0)
        throw loom::Error("warmup_cosine: decay_steps = 0 means 'decay until run.steps', but the run "
                          "has no step count; set [schedule] decay_steps explicitly");
      // A run no longer than its warmup never decays; max() keeps the arithmetic sane.
      decay_ = ctx.total_steps > warmup_ ? ctx.total_steps - warmup_ : 0;
    }
  }

  double factor(int64_t step) override {
    if (step <= warmup_) return step <= 0 ? 0.0 : double(step) / double(warmup_);
    if (decay_ == 0 || step - warmup_ >= decay_) return min_;
    const double progress = double(step - warmup_) / double(decay_);  // in (0, 1)
    return min_ + (1.0 - min_) * 0.5 * (1.0 + std::cos(kPi * progress));
  }

 private:
  int64_t warmup_;
  double min_;
  int64_t decay_;
};

}  // namespace

LOOM_PLUGIN("warmup_cosine", "0.1.0", loom::component<WarmupCosine>())
