// sign_descent: signSGD with momentum (Bernstein et al. 2018, "signSGD: compressed optimisation
// for non-convex problems"): each element moves by lr in the direction of the sign of its
// momentum buffer. Only the SDK's own header is included.
#include <loom/optimizer.hpp>

namespace {

class SignDescent final : public loom::Optimizer {
 public:
  static constexpr const char* name = "sign_descent";
  static constexpr const char* summary = "signSGD with momentum, built outside the Loom tree.";
  static constexpr loom_option_spec options[] = {
      loom::option("lr", LOOM_OPTION_TYPE_FLOAT, "0.001", "Step size of each element."),
      loom::option("momentum", LOOM_OPTION_TYPE_FLOAT, "0.9", "Momentum factor in [0, 1)."),
  };

  SignDescent(const loom::Config& c, const loom::Context&, Groups groups)
      : Optimizer(std::move(groups)), momentum_(c.f64("momentum")) {
    if (momentum_ < 0 || momentum_ >= 1) throw loom::Error("sign_descent: momentum must be in [0, 1)");
    for (size_t i = 0; i < groups_.size(); ++i) {
      buffers_.push_back(at::zeros_like(groups_[i].params));
      add_elementwise_state("momentum." + std::to_string(i), i, buffers_.back());
    }
  }

  void step(double lr, int64_t) override {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < groups_.size(); ++i) {
      buffers_[i].mul_(momentum_).add_(groups_[i].grads, 1 - momentum_);
      groups_[i].params.sub_(buffers_[i].sign(), lr);
    }
  }

 private:
  double momentum_;
  std::vector<at::Tensor> buffers_;
};

}  // namespace

LOOM_PLUGIN("sign_descent", "0.1.0", loom::component<SignDescent>())
