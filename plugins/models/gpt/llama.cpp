// llama.cpp: the `llama` component, the Llama architecture (Touvron et al. 2023) as Hugging
// Face's LlamaForCausalLM computes it: RMSNorm before attention and MLP, rotary position
// embeddings on q and k (HF's rotate_half layout), a SwiGLU MLP, optional grouped-query
// attention, no biases, and an output layer that is separate unless tie_embeddings is set.
// Parameter names and (out, in) weight layouts are Hugging Face's.
//
// It is deliberately not a general transformer: no KV cache, no generation, no RoPE scaling.
//
// Shapes: B = batch, T = sequence, C = channels (n_embd), H = query heads, K = key/value heads,
// D = head dim (C / H), F = MLP hidden width (ffn_hidden), L = n_layer, V = vocab_size.
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

// x * w / sqrt(mean(x^2) + eps) over the last dimension. x: (B, T, C); w: (C).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

// The Llama width rule when ffn_hidden = 0: two thirds of 4C (SwiGLU has three matrices where
// a GELU MLP has two, so this keeps the parameter count), rounded up to a multiple of 32.
// Meta's reference rounds to 256, which inflates small models; at C = 4096 the two differ by
// under 1% (10944 against 11008).
int64_t llama_ffn_hidden(int64_t C) { return (8 * C / 3 + 31) / 32 * 32; }

struct Layer {
  at::Tensor input_norm;                  // (C)
  at::Tensor q_proj, k_proj, v_proj;      // (H*D, C), (K*D, C), (K*D, C)
  at::Tensor o_proj;                      // (C, H*D)
  at::Tensor post_norm;                   // (C)
  at::Tensor gate_proj, up_proj;          // (F, C), (F, C)
  at::Tensor down_proj;                   // (C, F)
};

class Llama final : public loom::Model {
 public:
  static constexpr const char* name = "llama";
  static constexpr const char* summary =
      "Llama causal language model (RMSNorm, rotary positions, SwiGLU, grouped-query attention); "
      "Hugging Face Llama parameter names.";
  static constexpr loom_option_spec options[] = {
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "256", "Vocabulary size V: 256 for byte-level text."),
      loom::option("n_layer", LOOM_OPTION_TYPE_INT, "4", "Decoder layers L."),
      loom::option("n_head", LOOM_OPTION_TYPE_INT, "4", "Query heads H; must divide n_embd."),
      loom::option("n_kv_head", LOOM_OPTION_TYPE_INT, "0",
                   "Key/value heads K for grouped-query attention; must divide n_head. 0: n_head (no grouping)."),
      loom::option("n_embd", LOOM_OPTION_TYPE_INT, "128", "Width C; n_embd / n_head must be even (rotary pairs)."),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "256", "Block size: the longest input."),
      loom::option("ffn_hidden", LOOM_OPTION_TYPE_INT, "0",
                   "SwiGLU hidden width F. 0: 8 n_embd / 3 rounded up to a multiple of 32."),
      loom::option("rope_theta", LOOM_OPTION_TYPE_FLOAT, "10000.0", "Base of the rotary frequencies."),
      loom::option("rms_norm_eps", LOOM_OPTION_TYPE_FLOAT, "1e-5", "Epsilon of every RMSNorm."),
      loom::option("dropout", LOOM_OPTION_TYPE_FLOAT, "0.0",
                   "Dropout on attention weights and residual branches (HF Llama has attention dropout only)."),
      loom::option("tie_embeddings", LOOM_OPTION_TYPE_BOOL, "false",
                   "Use model.embed_tokens.weight as the output layer; no lm_head.weight."),
      loom::option("init_std", LOOM_OPTION_TYPE_FLOAT, "0.02",
                   "Std of the normal init; o_proj and down_proj get init_std / sqrt(2 n_layer)."),
  };

  Llama(const loom::Config& c, const loom::Context& ctx)
      : V_(c.i64("vocab_size")), L_(c.i64("n_layer")), H_(c.i64("n_head")), K_(c.i64("n_kv_head")),
        C_(c.i64("n_embd")), T_(c.i64("seq_len")), F_(c.i64("ffn_hidden")), eps_(c.f64("rms_norm_eps")),
        dropout_(c.f64("dropout")) {
    const double init_std = c.f64("init_std"), theta = c.f64("rope_theta");
    const bool tied = c.flag("tie_embeddings");
    if (K_ == 0) K_ = H_;
    if (F_ == 0) F_ = llama_ffn_hidden(C_);
    require(V_ >= 2, "llama: vocab_size must be at least 2, got " + std::to_string(V_));
    require(L_ >= 1, "llama: n_layer must be at least 1, got " + std::to_string(L_));
    require(H_ >= 1, "llama: n_head must be at least 1, got " + std::to_string(H_));
    require(C_ >= 1 && C_ % H_ == 0, "llama: n_embd (" + std::to_string(C_) +
                                         ") must be a positive multiple of n_head (" + std::to_string(H_) +
                                         "); change n_embd or n_head");
    require((C_ / H_) % 2 == 0, "llama: the head dim n_embd / n_head = " + std::to_string(C_ / H_) +
                                    " must be even for rotary embeddings; change n_embd or n_head");
    require(K_ >= 1 && H_ % K_ == 0, "llama: n_kv_head (" + std::to_string(K_) + ") must divide n_head (" +
                                         std::to_string(H_) + "); use a divisor of n_head, or 0 for n_head");
    require(F_ >= 1, "llama: ffn_hidden must be positive, or 0 for the Llama rule; got " + std::to_string(F_));
    require(T_ >= 1, "llama: seq_len must be at least 1, got " + std::to_string(T_));
    require(theta > 0.0, "llama: rope_theta must be positive, got " + std::to_string(theta));
    require(eps_ > 0.0, "llama: rms_norm_eps must be positive, got " + std::to_string(eps_));
    require(dropout_ >= 0.0 && dropout_ < 1.0, "llama: dropout must be in [0, 1), got " + std::to_string(dropout_));
    require(init_std > 0.0, "llama: init_std must be positive, got " + std::to_string(init_std));

    // Own generator: initialization depends on the run seed only, not on what ran before.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(ctx.seed);
    const at::Device device(ctx.device);
    const auto normal = [&](at::IntArrayRef shape, double s) { return at::normal(0.0, s, shape, gen).to(device); };
    const auto ones = [&](int64_t size) { return at::ones({size}, device); };
    const double proj_std = init_std / std::sqrt(2.0 * static_cast<double>(L_));  // scaled residual init, as GPT-2
    const int64_t D = C_ / H_;
    // Weight decay applies to the projection matrices and lm_head; embeddings and norms are exempt.
    const auto param = [&](const std::string& n, at::Tensor init, uint32_t flags) {
      matmul_params_ += init.numel();
      return add_param(n, std::move(init), flags);
    };

    // Untied, the input embedding is a lookup only and stays out of the FLOPs' N.
    embed_ = tied ? param("model.embed_tokens.weight", normal({V_, C_}, init_std), kNoDecay)
                  : add_param("model.embed_tokens.weight", normal({V_, C_}, init_std), kNoDecay);  // (V, C)
    for (int64_t i = 0; i < L_; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Layer l;  // registered in Hugging Face's order: self_attn, mlp, then the two norms
      l.q_proj = param(p + "self_attn.q_proj.weight", normal({H_ * D, C_}, init_std), 0);
      l.k_proj = param(p + "self_attn.k_proj.weight", normal({K_ * D, C_}, init_std), 0);
      l.v_proj = param(p + "self_attn.v_proj.weight", normal({K_ * D, C_}, init_std), 0);
      l.o_proj = param(p + "self_attn.o_proj.weight", normal({C_, H_ * D}, proj_std), 0);
      l.gate_proj = param(p + "mlp.gate_proj.weight", normal({F_, C_}, init_std), 0);
      l.up_proj = param(p + "mlp.up_proj.weight", normal({F_, C_}, init_std), 0);
      l.down_proj = param(p + "mlp.down_proj.weight", normal({C_, F_}, proj_std), 0);
      l.input_norm = param(p + "input_layernorm.weight", ones(C_), kNoDecay);
      l.post_norm = param(p + "post_attention_layernorm.weight", ones(C_), kNoDecay);
      layers_.push_back(l);
    }
    norm_ = param("model.norm.weight", ones(C_), kNoDecay);                           // (C)
    lm_head_ = tied ? embed_ : param("lm_head.weight", normal({V_, C_}, init_std), 0);     // (V, C)
    mask_ = loom_gpt::causal_mask(T_, device);                                         // (T, T)
    rope_ = loom_gpt::Rope(T_, D, theta, device);                                      // (T, D) cos and sin
  }

  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    return loss(inputs, targets, {at::Tensor(), mask_});
  }

  // Packed rows: position_ids and document_ids when the dataset gives them (packing.hpp).
  at::Tensor loss_sum(const loom::BatchFields& batch) override {
    return loss(batch.input_ids, batch.labels, loom_gpt::layout_of(batch, mask_, T_, "llama"));
  }

  double flops_per_token() const override { return loom_gpt::flops_per_token(matmul_params_, L_, C_, T_); }

 private:
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets, const loom_gpt::Layout& layout) {
    loom_gpt::check_batch("llama", inputs, targets, T_, V_);
    at::Tensor x = at::embedding(embed_, inputs);  // (B, T, C)
    for (const Layer& l : layers_) {
      x = x + attention(l, rms_norm(x, l.input_norm, eps_), layout);  // (B, T, C)
      x = x + mlp(l, rms_norm(x, l.post_norm, eps_));         // (B, T, C)
    }
    x = rms_norm(x, norm_, eps_);                                  // (B, T, C)
    return loom::token_loss_sum(at::linear(x, lm_head_), targets);  // logits (B, T, V)
  }

  // x: (B, T, C) after input_layernorm -> the attention branch (B, T, C).
  at::Tensor attention(const Layer& l, const at::Tensor& x, const loom_gpt::Layout& layout) const {
    const int64_t B = x.size(0), T = x.size(1), D = C_ / H_;
    const at::Tensor q = at::linear(x, l.q_proj).view({B, T, H_, D}).transpose(1, 2);  // (B, H, T, D)
    const at::Tensor k = at::linear(x, l.k_proj).view({B, T, K_, D}).transpose(1, 2);  // (B, K, T, D)
    const at::Tensor v = at::linear(x, l.v_proj).view({B, T, K_, D}).transpose(1, 2);  // (B, K, T, D)
    const at::Tensor y = loom_gpt::causal_attention(rope_.apply(q, layout.positions), rope_.apply(k, layout.positions),
                                                    v, layout.mask, dropout_, training_);  // (B, H, T, D)
    const at::Tensor merged = y.transpose(1, 2).reshape({B, T, H_ * D});  // (B, T, C)
    return loom_gpt::maybe_dropout(at::linear(merged, l.o_proj), dropout_, training_);
  }

  // x: (B, T, C) after post_attention_layernorm -> the SwiGLU branch (B, T, C).
  at::Tensor mlp(const Layer& l, const at::Tensor& x) const {
    const at::Tensor h = at::silu(at::linear(x, l.gate_proj)) * at::linear(x, l.up_proj);  // (B, T, F)
    return loom_gpt::maybe_dropout(at::linear(h, l.down_proj), dropout_, training_);              // (B, T, C)
  }

  int64_t V_, L_, H_, K_, C_, T_, F_;
  double eps_, dropout_;
  int64_t matmul_params_ = 0;  // the N of 6N: all but an untied input embedding
  at::Tensor embed_;           // (V, C)
  std::vector<Layer> layers_;  // L
  at::Tensor norm_;            // (C)
  at::Tensor lm_head_;         // (V, C); the same tensor as embed_ when tied
  at::Tensor mask_;            // (T, T) float, -inf above the diagonal; a buffer
  loom_gpt::Rope rope_;        // (T, D) cos and sin; buffers
};

}  // namespace

namespace loom_gpt {
const loom_component* llama_component() { return loom::component<Llama>(); }
}  // namespace loom_gpt
