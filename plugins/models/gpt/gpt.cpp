// gpt.cpp: the `gpt` component, GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel
// computes it: learned position embeddings, pre-LayerNorm blocks of causal self-attention and
// a 4x GELU (tanh approximation) MLP, a final LayerNorm, and output logits through the input
// embedding (tied weights). Parameter names and layouts are Hugging Face's, including Conv1D's
// (in, out) weight layout, so exported weights load into GPT2LMHeadModel as they are.
//
// It is deliberately not a general transformer: no KV cache, no generation, no fused kernels.
//
// Shapes: B = batch, T = sequence, C = channels (n_embd), H = heads, D = head dim (C / H),
// L = n_layer, V = vocab_size.
#include <loom/model.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "attention.hpp"
#include "common.hpp"
#include "components.hpp"
#include "packing.hpp"

namespace {

using loom_gpt::require;
constexpr uint32_t kNoDecay = LOOM_PARAM_FLAG_NO_DECAY;
constexpr double kLayerNormEps = 1e-5;  // GPT-2's layer_norm_epsilon

// Hugging Face's Conv1D: y = x W + b with W stored as (in, out). x: (B, T, in) -> (B, T, out).
// b may be undefined (bias = false).
at::Tensor conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const at::Tensor rows = x.reshape({-1, x.size(-1)});                     // (B*T, in)
  const at::Tensor y = b.defined() ? at::addmm(b, rows, w) : at::mm(rows, w);  // (B*T, out)
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = w.size(1);
  return y.view(sizes);  // (B, T, out)
}

struct Block {
  at::Tensor ln_1_w, ln_1_b;            // (C), (C)
  at::Tensor c_attn_w, c_attn_b;        // (C, 3C), (3C): q, k, v side by side
  at::Tensor attn_proj_w, attn_proj_b;  // (C, C), (C)
  at::Tensor ln_2_w, ln_2_b;            // (C), (C)
  at::Tensor c_fc_w, c_fc_b;            // (C, 4C), (4C)
  at::Tensor mlp_proj_w, mlp_proj_b;    // (4C, C), (C)
};

class Gpt final : public loom::Model {
 public:
  static constexpr const char* name = "gpt";
  static constexpr const char* summary =
      "GPT-2 causal language model (learned positions, pre-LayerNorm, GELU MLP, tied embeddings); "
      "Hugging Face GPT2 parameter names.";
  static constexpr loom_option_spec options[] = {
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "256",
                   "Vocabulary size V: 256 for byte-level text, 50257 for GPT-2's BPE."),
      loom::option("n_layer", LOOM_OPTION_TYPE_INT, "4", "Transformer blocks L (GPT-2 small: 12)."),
      loom::option("n_head", LOOM_OPTION_TYPE_INT, "4", "Attention heads H; must divide n_embd (GPT-2 small: 12)."),
      loom::option("n_embd", LOOM_OPTION_TYPE_INT, "128", "Width C; a multiple of n_head (GPT-2 small: 768)."),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "256",
                   "Block size: the longest input and the number of position embeddings (GPT-2: 1024)."),
      loom::option("dropout", LOOM_OPTION_TYPE_FLOAT, "0.0",
                   "Dropout on embeddings, attention weights and residual branches (GPT-2 trained with 0.1)."),
      loom::option("bias", LOOM_OPTION_TYPE_BOOL, "true",
                   "Biases in projections and LayerNorms as GPT-2; false drops all of them "
                   "(such weights no longer load into GPT2LMHeadModel)."),
      loom::option("init_std", LOOM_OPTION_TYPE_FLOAT, "0.02",
                   "Std of the normal init of embeddings and weights; c_proj weights get init_std / sqrt(2 n_layer)."),
  };

  Gpt(const loom::Config& c, const loom::Context& ctx)
      : V_(c.i64("vocab_size")), L_(c.i64("n_layer")), H_(c.i64("n_head")), C_(c.i64("n_embd")),
        T_(c.i64("seq_len")), dropout_(c.f64("dropout")), bias_(c.flag("bias")) {
    const double init_std = c.f64("init_std");
    require(V_ >= 2, "gpt: vocab_size must be at least 2, got " + std::to_string(V_));
    require(L_ >= 1, "gpt: n_layer must be at least 1, got " + std::to_string(L_));
    require(H_ >= 1, "gpt: n_head must be at least 1, got " + std::to_string(H_));
    require(C_ >= 1 && C_ % H_ == 0, "gpt: n_embd (" + std::to_string(C_) + ") must be a positive multiple of " +
                                         "n_head (" + std::to_string(H_) + "); change n_embd or n_head");
    require(T_ >= 1, "gpt: seq_len must be at least 1, got " + std::to_string(T_));
    require(dropout_ >= 0.0 && dropout_ < 1.0, "gpt: dropout must be in [0, 1), got " + std::to_string(dropout_));
    require(init_std > 0.0, "gpt: init_std must be positive, got " + std::to_string(init_std));

    // Own generator: initialization depends on the run seed only, not on what ran before.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(ctx.seed);
    const at::Device device(ctx.device);
    const auto normal = [&](at::IntArrayRef shape, double s) { return at::normal(0.0, s, shape, gen).to(device); };
    const auto filled = [&](at::IntArrayRef shape, double v) { return at::full(shape, v, device); };
    const double proj_std = init_std / std::sqrt(2.0 * static_cast<double>(L_));  // GPT-2's scaled residual init
    // Weight decay applies to the matrices of the blocks (c_attn, c_proj, c_fc) only; embeddings,
    // LayerNorms and biases are exempt, as in minGPT's configure_optimizers.
    const auto param = [&](const std::string& n, at::Tensor init, uint32_t flags) {
      matmul_params_ += init.numel();
      return add_param(n, std::move(init), flags);
    };
    const auto bias = [&](const std::string& n, int64_t size) {  // zeros, or none when bias = false
      return bias_ ? param(n, filled({size}, 0.0), kNoDecay) : at::Tensor();
    };

    wte_ = param("transformer.wte.weight", normal({V_, C_}, init_std), kNoDecay);  // (V, C), also the output layer
    wpe_ = add_param("transformer.wpe.weight", normal({T_, C_}, init_std), kNoDecay);  // (T, C), lookup only
    for (int64_t i = 0; i < L_; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      Block b;
      b.ln_1_w = param(p + "ln_1.weight", filled({C_}, 1.0), kNoDecay);
      b.ln_1_b = bias(p + "ln_1.bias", C_);
      b.c_attn_w = param(p + "attn.c_attn.weight", normal({C_, 3 * C_}, init_std), 0);
      b.c_attn_b = bias(p + "attn.c_attn.bias", 3 * C_);
      b.attn_proj_w = param(p + "attn.c_proj.weight", normal({C_, C_}, proj_std), 0);
      b.attn_proj_b = bias(p + "attn.c_proj.bias", C_);
      b.ln_2_w = param(p + "ln_2.weight", filled({C_}, 1.0), kNoDecay);
      b.ln_2_b = bias(p + "ln_2.bias", C_);
      b.c_fc_w = param(p + "mlp.c_fc.weight", normal({C_, 4 * C_}, init_std), 0);
      b.c_fc_b = bias(p + "mlp.c_fc.bias", 4 * C_);
      b.mlp_proj_w = param(p + "mlp.c_proj.weight", normal({4 * C_, C_}, proj_std), 0);
      b.mlp_proj_b = bias(p + "mlp.c_proj.bias", C_);
      blocks_.push_back(b);
    }
    ln_f_w_ = param("transformer.ln_f.weight", filled({C_}, 1.0), kNoDecay);  // (C)
    ln_f_b_ = bias("transformer.ln_f.bias", C_);                               // (C)
    mask_ = loom_gpt::causal_mask(T_, device);                                  // (T, T)
  }

  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    return loss(inputs, targets, {at::Tensor(), mask_});
  }

  // Packed rows: position_ids and document_ids when the dataset gives them (packing.hpp).
  at::Tensor loss_sum(const loom::BatchFields& batch) override {
    return loss(batch.input_ids, batch.labels, loom_gpt::layout_of(batch, mask_, T_, "gpt"));
  }

  double flops_per_token() const override { return loom_gpt::flops_per_token(matmul_params_, L_, C_, T_); }

 private:
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets, const loom_gpt::Layout& layout) {
    loom_gpt::check_batch("gpt", inputs, targets, T_, V_);
    const at::Tensor positions = layout.positions.defined() ? layout.positions
                                                            : at::arange(inputs.size(1), inputs.options());  // (B, T) or (T)
    at::Tensor x = at::embedding(wte_, inputs) + at::embedding(wpe_, positions);  // (B, T, C)
    x = loom_gpt::maybe_dropout(x, dropout_, training_);
    for (const Block& b : blocks_) {
      x = x + attention(b, at::layer_norm(x, {C_}, b.ln_1_w, b.ln_1_b, kLayerNormEps), layout.mask);  // (B, T, C)
      x = x + mlp(b, at::layer_norm(x, {C_}, b.ln_2_w, b.ln_2_b, kLayerNormEps));        // (B, T, C)
    }
    x = at::layer_norm(x, {C_}, ln_f_w_, ln_f_b_, kLayerNormEps);  // (B, T, C)
    return loom::token_loss_sum(at::linear(x, wte_), targets);     // logits (B, T, V)
  }

  // x: (B, T, C) after ln_1 -> the attention branch (B, T, C). mask: see causal_attention.
  at::Tensor attention(const Block& b, const at::Tensor& x, const at::Tensor& mask) const {
    const int64_t B = x.size(0), T = x.size(1), D = C_ / H_;
    const std::vector<at::Tensor> qkv = conv1d(x, b.c_attn_w, b.c_attn_b).split(C_, -1);  // 3 x (B, T, C)
    const at::Tensor q = qkv[0].view({B, T, H_, D}).transpose(1, 2);                        // (B, H, T, D)
    const at::Tensor k = qkv[1].view({B, T, H_, D}).transpose(1, 2);                        // (B, H, T, D)
    const at::Tensor v = qkv[2].view({B, T, H_, D}).transpose(1, 2);                        // (B, H, T, D)
    const at::Tensor y = loom_gpt::causal_attention(q, k, v, mask, dropout_, training_);    // (B, H, T, D)
    const at::Tensor merged = y.transpose(1, 2).reshape({B, T, C_});                        // (B, T, C)
    return loom_gpt::maybe_dropout(conv1d(merged, b.attn_proj_w, b.attn_proj_b), dropout_, training_);
  }

  // x: (B, T, C) after ln_2 -> the MLP branch (B, T, C).
  at::Tensor mlp(const Block& b, const at::Tensor& x) const {
    const at::Tensor h = at::gelu(conv1d(x, b.c_fc_w, b.c_fc_b), "tanh");  // (B, T, 4C)
    return loom_gpt::maybe_dropout(conv1d(h, b.mlp_proj_w, b.mlp_proj_b), dropout_, training_);
  }

  int64_t V_, L_, H_, C_, T_;
  double dropout_;
  bool bias_;
  int64_t matmul_params_ = 0;  // every parameter but wpe: the N of 6N
  at::Tensor wte_;             // (V, C)
  at::Tensor wpe_;             // (T, C)
  std::vector<Block> blocks_;  // L
  at::Tensor ln_f_w_, ln_f_b_; // (C), (C)
  at::Tensor mask_;            // (T, T) float, -inf above the diagonal; a buffer
};

}  // namespace

namespace loom_gpt {
const loom_component* gpt_component() { return loom::component<Gpt>(); }
}  // namespace loom_gpt
