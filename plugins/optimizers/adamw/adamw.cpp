// adamw: Adam with decoupled weight decay (Loshchilov & Hutter, arXiv:1711.05101), the update
// PyTorch's torch.optim.AdamW performs, run over the host's flat buffers: one fused pass per
// dtype/device group (loom_ops/fused_adamw.hpp; LibTorch's fused kernel on CUDA) instead of about eight
// ops per parameter.
#include <ATen/core/grad_mode.h>
#include <loom/optimizer.hpp>

#include <cmath>

#include <loom_ops/fused_adamw.hpp>

namespace {

class AdamW final : public loom::Optimizer {
 public:
  static constexpr const char* name = "adamw";
  static constexpr const char* summary = "AdamW over flat parameter buffers (fused, no per-parameter loop).";
  static constexpr loom_option_spec options[] = {
      loom::option("lr", LOOM_OPTION_TYPE_FLOAT, "0.001", "Base learning rate; the schedule scales it."),
      loom::option("beta1", LOOM_OPTION_TYPE_FLOAT, "0.9", "Decay of the first-moment average."),
      loom::option("beta2", LOOM_OPTION_TYPE_FLOAT, "0.999", "Decay of the second-moment average."),
      loom::option("eps", LOOM_OPTION_TYPE_FLOAT, "1e-8", "Added to the denominator for stability."),
      loom::option("weight_decay", LOOM_OPTION_TYPE_FLOAT, "0.01",
                   "Decoupled decay; parameters flagged no-decay (norms, biases) are exempt."),
  };

  AdamW(const loom::Config& c, const loom::Context&, Groups groups)
      : Optimizer(std::move(groups)),
        beta1_(c.f64("beta1")),
        beta2_(c.f64("beta2")),
        eps_(c.f64("eps")),
        weight_decay_(c.f64("weight_decay")) {
    if (!(beta1_ >= 0 && beta1_ < 1 && beta2_ >= 0 && beta2_ < 1))
      throw loom::Error("adamw: beta1 and beta2 must be in [0, 1)");
    if (eps_ <= 0 || weight_decay_ < 0) throw loom::Error("adamw: eps must be > 0 and weight_decay >= 0");
    for (size_t i = 0; i < groups_.size(); ++i) {
      State s{at::zeros_like(groups_[i].params), at::zeros_like(groups_[i].params), {}, decay_mask(groups_[i])};
      add_elementwise_state("exp_avg." + std::to_string(i), i, s.exp_avg);
      add_elementwise_state("exp_avg_sq." + std::to_string(i), i, s.exp_avg_sq);
      state_.push_back(std::move(s));
    }
  }

  static constexpr uint64_t requirements = LOOM_OPTIMIZER_ELEMENTWISE;

  void step(double lr, int64_t step) override {
    for (size_t i = 0; i < groups_.size(); ++i) update(lr, step, i, 0, groups_[i].params.numel(), state_[i].scratch);
  }

  // Optimizer offload's pieces: the same per-element update, over a narrowed view of each buffer.
  void step_range(double lr, int64_t step, size_t group, int64_t begin, int64_t end) override {
    loom_ops::AdamWScratch piece;  // the tensor-op path's denominators, sized to the piece
    piece.step_count = state_[group].scratch.step_count;
    update(lr, step, group, begin, end, piece);
  }

 private:
  void update(double lr, int64_t step, size_t group, int64_t begin, int64_t end, loom_ops::AdamWScratch& scratch) {
    at::NoGradGuard no_grad;
    const double bias1 = 1.0 - std::pow(beta1_, static_cast<double>(step));
    const double bias2_sqrt = std::sqrt(1.0 - std::pow(beta2_, static_cast<double>(step)));
    const auto piece = [&](const at::Tensor& t) { return t.narrow(0, begin, end - begin); };
    State& s = state_[group];
    at::Tensor p = piece(groups_[group].params), m = piece(s.exp_avg), v = piece(s.exp_avg_sq);
    loom_ops::adamw_step(p, piece(groups_[group].grads), m, v, piece(s.decay_mask), scratch,
                         {lr, beta1_, beta2_, eps_, weight_decay_, bias1, bias2_sqrt, step});
  }

  struct State {
    at::Tensor exp_avg, exp_avg_sq;
    loom_ops::AdamWScratch scratch;  // made by the path that needs it, when it first runs
    at::Tensor decay_mask;  // 1 where weight decay applies
  };
  double beta1_, beta2_, eps_, weight_decay_;
  std::vector<State> state_;
};

}  // namespace

LOOM_PLUGIN("adamw", "0.1.0", loom::component<AdamW>())
