// sgd: stochastic gradient descent with optional momentum and weight decay, applied to the
// host's flat buffers: one fused update per group, whatever the parameter count.
#include <ATen/core/grad_mode.h>
#include <loom/optimizer.hpp>

namespace {

class Sgd final : public loom::Optimizer {
 public:
  static constexpr const char* name = "sgd";
  static constexpr const char* summary = "SGD with optional momentum and decoupled weight decay.";
  static constexpr loom_option_spec options[] = {
      loom::option("lr", LOOM_OPTION_TYPE_FLOAT, "0.01", "Base learning rate; the schedule scales it."),
      loom::option("momentum", LOOM_OPTION_TYPE_FLOAT, "0.0", "Momentum factor; 0 disables the buffer."),
      loom::option("weight_decay", LOOM_OPTION_TYPE_FLOAT, "0.0",
                   "Decoupled decay; parameters flagged no-decay are exempt."),
  };

  Sgd(const loom::Config& c, const loom::Context&, Groups groups)
      : Optimizer(std::move(groups)), momentum_(c.f64("momentum")), weight_decay_(c.f64("weight_decay")) {
    if (momentum_ < 0 || momentum_ >= 1) throw loom::Error("sgd: momentum must be in [0, 1)");
    if (weight_decay_ < 0) throw loom::Error("sgd: weight_decay must be >= 0");
    for (size_t i = 0; i < groups_.size(); ++i) {
      decay_mask_.push_back(decay_mask(groups_[i]));
      if (momentum_ > 0) {
        buffers_.push_back(at::zeros_like(groups_[i].params));
        add_elementwise_state("momentum." + std::to_string(i), i, buffers_.back());
      }
    }
  }

  static constexpr uint64_t requirements = LOOM_OPTIMIZER_ELEMENTWISE;

  void step(double lr, int64_t) override {
    for (size_t i = 0; i < groups_.size(); ++i) update(lr, i, 0, groups_[i].params.numel());
  }
  void step_range(double lr, int64_t, size_t group, int64_t begin, int64_t end) override {
    update(lr, group, begin, end);
  }

 private:
  void update(double lr, size_t group, int64_t begin, int64_t end) {
    at::NoGradGuard no_grad;
    const auto piece = [&](const at::Tensor& t) { return t.narrow(0, begin, end - begin); };
    at::Tensor params = piece(groups_[group].params);
    const at::Tensor grads = piece(groups_[group].grads);
    if (weight_decay_ > 0) params.addcmul_(params, piece(decay_mask_[group]), -lr * weight_decay_);
    if (momentum_ > 0) {
      at::Tensor buffer = piece(buffers_[group]);
      buffer.mul_(momentum_).add_(grads);
      params.add_(buffer, -lr);
    } else {
      params.add_(grads, -lr);
    }
  }

  double momentum_, weight_decay_;
  std::vector<at::Tensor> decay_mask_, buffers_;
};

}  // namespace

LOOM_PLUGIN("sgd", "0.1.0", loom::component<Sgd>())
