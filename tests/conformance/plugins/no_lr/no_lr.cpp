// no_lr.cpp: an optimizer that declares no `lr` option. The host reads "lr" as the base
// learning rate the schedule scales, so it must refuse this plugin (exit 3) instead of
// training at 1.0, which is what it used to do.
#include <ATen/core/grad_mode.h>
#include <loom/optimizer.hpp>

namespace {

class NoLr final : public loom::Optimizer {
 public:
  static constexpr const char* name = "no_lr";
  static constexpr const char* summary = "Conformance: an optimizer without an lr option.";
  static constexpr loom_option_spec options[] = {
      loom::option("momentum", LOOM_OPTION_TYPE_FLOAT, "0.0", "Declared, but no lr."),
  };
  NoLr(const loom::Config&, const loom::Context&, Groups groups) : Optimizer(std::move(groups)) {}
  void step(double lr, int64_t) override {
    at::NoGradGuard no_grad;
    for (Group& g : groups_) g.params.add_(g.grads, -lr);
  }
};

}  // namespace

LOOM_PLUGIN("no_lr", "0.1.0", loom::component<NoLr>())
