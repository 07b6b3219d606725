// mlp_lm: a small next-token model over a byte vocabulary. Each position sees the embeddings
// of its last `context` tokens, concatenated, through one GELU hidden layer.
//
// Shapes: B = batch, T = sequence, C = n_embd, K = context, H = hidden, V = vocab_size.
#include <loom/model.hpp>

namespace {

class MlpLm final : public loom::Model {
 public:
  static constexpr const char* name = "mlp_lm";
  static constexpr const char* summary = "Next-token MLP over the last `context` token embeddings.";
  static constexpr loom_option_spec options[] = {
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "256", "Vocabulary size (256 for bytes)."),
      loom::option("n_embd", LOOM_OPTION_TYPE_INT, "32", "Embedding width C."),
      loom::option("context", LOOM_OPTION_TYPE_INT, "4", "Previous tokens each position sees (K)."),
      loom::option("hidden", LOOM_OPTION_TYPE_INT, "128", "Hidden layer width H."),
      loom::option("init_std", LOOM_OPTION_TYPE_FLOAT, "0.02", "Std of the normal weight init."),
  };

  MlpLm(const loom::Config& c, const loom::Context& ctx)
      : vocab_(c.i64("vocab_size")), embd_(c.i64("n_embd")), context_(c.i64("context")), hidden_(c.i64("hidden")) {
    if (vocab_ < 2 || embd_ < 1 || context_ < 1 || hidden_ < 1)
      throw loom::Error("mlp_lm: vocab_size >= 2 and n_embd, context, hidden >= 1 are required");
    // Own generator: initialization depends on the run seed only, not on what ran before.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(ctx.seed);
    const double std = c.f64("init_std");
    const auto normal = [&](at::IntArrayRef shape) {
      return at::normal(0.0, std, shape, gen).to(at::Device(ctx.device));
    };
    const auto zeros = [&](at::IntArrayRef shape) { return at::zeros(shape, at::Device(ctx.device)); };
    wte_ = add_param("wte.weight", normal({vocab_, embd_}), LOOM_PARAM_FLAG_NO_DECAY);  // (V, C)
    fc1_w_ = add_param("fc1.weight", normal({hidden_, context_ * embd_}));              // (H, K*C)
    fc1_b_ = add_param("fc1.bias", zeros({hidden_}), LOOM_PARAM_FLAG_NO_DECAY);         // (H)
    fc2_w_ = add_param("fc2.weight", normal({vocab_, hidden_}));                        // (V, H)
    fc2_b_ = add_param("fc2.bias", zeros({vocab_}), LOOM_PARAM_FLAG_NO_DECAY);          // (V)
  }

  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    const at::Tensor x = at::embedding(wte_, inputs);  // (B, T, C)
    // Position t sees tokens t, t-1, ..., t-K+1; earlier than 0 reads zeros.
    std::vector<at::Tensor> shifted;
    for (int64_t k = 0; k < context_; ++k)
      shifted.push_back(k == 0 ? x : at::constant_pad_nd(x, {0, 0, k, 0}).narrow(1, 0, x.size(1)));
    const at::Tensor h = at::gelu(at::linear(at::cat(shifted, -1), fc1_w_, fc1_b_));  // (B, T, H)
    return loom::token_loss_sum(at::linear(h, fc2_w_, fc2_b_), targets);              // logits (B, T, V)
  }

  double flops_per_token() const override {
    // 6 FLOPs per weight per token (forward 2 + backward 4) over the two matrix products.
    return 6.0 * static_cast<double>(hidden_ * context_ * embd_ + vocab_ * hidden_);
  }

 private:
  int64_t vocab_, embd_, context_, hidden_;
  at::Tensor wte_, fc1_w_, fc1_b_, fc2_w_, fc2_b_;
};

}  // namespace

LOOM_PLUGIN("mlp_lm", "0.1.0", loom::component<MlpLm>())
