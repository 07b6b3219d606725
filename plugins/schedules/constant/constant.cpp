// constant.cpp: the `constant` learning-rate schedule. The factor is 1 at every step, so the
// optimizer runs at its configured lr; the default when a manifest names no schedule.
#include <loom/schedule.hpp>

namespace {

class Constant final : public loom::Schedule {
 public:
  static constexpr const char* name = "constant";
  static constexpr const char* summary = "Keeps the learning rate at the optimizer's lr.";

  Constant(const loom::Config&, const loom::Context&) {}
  double factor(int64_t) override { return 1.0; }
};

}  // namespace

LOOM_PLUGIN("constant", "0.1.0", loom::component<Constant>())
