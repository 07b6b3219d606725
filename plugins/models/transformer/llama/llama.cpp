// llama.cpp: the Llama architecture (Touvron et al. 2023) as Hugging Face's LlamaForCausalLM
// computes it: RMSNorm before attention and MLP, rotary position embeddings on q and k (HF's
// rotate_half layout, optionally rescaled), a SwiGLU MLP, optional grouped-query attention, an
// output layer that is separate unless tied. The switches of LlamaSpec add what Mistral,
// Qwen2 and Qwen3 change: q/k/v and o biases, q/k norms, a head dim of its own. Parameter
// names and (out, in) weight layouts are Hugging Face's. The `llama` component is the model
// configured by manifest options.
//
// It is deliberately not a general transformer; generation (decode, kv_cache.hpp) keeps every
// position's keys and values.
//
// Tensor parallelism ([distributed] tensor_parallel = T, loom/tensor_parallel.hpp): each rank
// holds H/T query heads and K/T key/value heads (q/k/v column-parallel, o_proj row-parallel),
// F/T of the MLP's hidden units (gate/up column-parallel, down_proj row-parallel) and V/T rows
// of the embedding and output layer, whose loss is computed without gathering the logits. The
// norms and o_proj's bias stay whole. Every layout starts from the same weights.
//
// Shapes: B = batch, T = sequence, C = channels (n_embd), H = query heads, K = key/value heads,
// D = head dim, F = MLP hidden width (ffn_hidden), L = n_layer, V = vocab_size.
#include "llama/llama.hpp"

#include <loom_ops/add_rms_norm.hpp>
#include <loom_ops/grouped_linear.hpp>
#include <loom_ops/rms_norm.hpp>
#include <loom_ops/rope_heads.hpp>
#include <loom_ops/swiglu.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <loom/sequence_parallel.hpp>
#include <loom/tensor_parallel.hpp>

#include "layers/causal_lm.hpp"
#include "layers/cuda_kernels.hpp"
#include "layers/model_common.hpp"
#include "components.hpp"

namespace loom_gpt {
namespace {

namespace tp = loom::tensor_parallel;
namespace sp = loom::sequence_parallel;
constexpr uint32_t kNoDecay = LOOM_PARAM_FLAG_NO_DECAY;

using loom_ops::rms_norm;  // Hugging Face's LlamaRMSNorm (loom_ops/rms_norm.hpp)

// The Llama width rule when ffn_hidden = 0: two thirds of 4C (SwiGLU has three matrices where
// a GELU MLP has two, so this keeps the parameter count), rounded up to a multiple of 32.
// Meta's reference rounds to 256, which inflates small models; at C = 4096 the two differ by
// under 1% (10944 against 11008).
int64_t llama_ffn_hidden(int64_t C) { return (8 * C / 3 + 31) / 32 * 32; }

struct Layer {
  at::Tensor input_norm;                  // (C)
  loom::AdaptedLinear q_proj, k_proj, v_proj;  // (H*D, C), (K*D, C), (K*D, C)
  at::Tensor q_bias, k_bias, v_bias;      // (H*D), (K*D), (K*D) or undefined
  at::Tensor q_norm, k_norm;              // (D) each or undefined
  loom::AdaptedLinear o_proj;             // (C, H*D)
  at::Tensor o_bias;                      // (C) or undefined
  at::Tensor post_norm;                   // (C)
  loom::AdaptedLinear gate_proj, up_proj;  // (F, C), (F, C); undefined in a sparse layer
  loom::AdaptedLinear down_proj;           // (C, F)
  bool sparse = false;                     // a mixture of experts' layer: moe instead of the MLP
  MoeWeights moe;
};

class LlamaModel : public CausalLm {
 public:
  LlamaModel(const LlamaSpec& spec, const loom::Context& ctx) : s_(spec), tp_(ctx) {
    check_llama_spec(s_);
    check_tensor_split(s_.component, tp_,
                       {{s_.n_head, "the query heads (n_head)"}, {s_.n_kv_head, "the key/value heads (n_kv_head)"},
                        {s_.ffn_hidden, "the MLP width (ffn_hidden)"}, {s_.vocab_size, "the vocabulary (vocab_size)"}},
                       s_.dropout);
    set_tensor_parallel(tp_);
    if (s_.moe.any()) check_moe_layout(ctx);
    ep_ = loom::expert_parallel::Group(ctx);
    // Key/value heads that S does not divide are repeated in attention, so only the queries count.
    set_sequence_parallel(sp::Group(ctx), s_.component, s_.n_head / tp_.size, s_.dropout);
    set_context_parallel(loom::context_parallel::Group(ctx), s_.component, s_.dropout);
    const int64_t V = s_.vocab_size, C = s_.n_embd, H = s_.n_head, K = s_.n_kv_head, D = s_.head_dim,
                  F = s_.ffn_hidden, L = s_.n_layer;
    // Own generator: initialization depends on the run seed only, not on what ran before.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(s_.seed);
    const at::Device device(ctx.device);
    const double proj_std = s_.init_std / std::sqrt(2.0 * static_cast<double>(L));  // scaled residual init, as GPT-2
    const auto normal = [&](at::IntArrayRef shape, double std) {
      return s_.random_init ? at::normal(0.0, std, shape, gen).to(device) : at::empty(shape, device);
    };
    const auto filled = [&](int64_t size, double value) { return at::full({size}, value, device); };
    // Weight decay applies to the projection matrices and lm_head; embeddings, norms and biases are exempt.
    const auto param = [&](const std::string& n, at::Tensor init, uint32_t flags) {
      matmul_params_ += init.numel();
      return add_param(n, std::move(init), flags);
    };
    // A projection: nn.Linear's layout, with a LoRA adapter when [lora] targets it; cut along
    // `split` (0: its outputs, 1: its inputs) over the tensor-parallel group.
    const auto projection = [&](const std::string& module, at::Tensor init, int64_t split) {
      matmul_params_ += init.numel();
      return add_split_linear(module, init, split, ctx);
    };
    const auto column_bias = [&](const std::string& n, int64_t size) {
      return add_split_param(n, filled(size, 0.0), 0, ctx, kNoDecay);
    };

    // Untied, the input embedding is a lookup only and stays out of the FLOPs' N.
    if (s_.tie_embeddings) matmul_params_ += V * C;
    embed_ = add_split_param("model.embed_tokens.weight", normal({V, C}, s_.init_std), 0, ctx, kNoDecay);
    for (int64_t i = 0; i < L; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      begin_unit(i);  // each layer is a unit of [distributed] shard = "parameters"
      Layer l;  // registered in Hugging Face's order: self_attn, mlp, then the two norms
      const bool qkv_bias = s_.bias != ProjectionBias::none, o_bias = s_.bias == ProjectionBias::qkv_and_output;
      l.q_proj = projection(p + "self_attn.q_proj", normal({H * D, C}, s_.init_std), 0);
      if (qkv_bias) l.q_bias = column_bias(p + "self_attn.q_proj.bias", H * D);
      l.k_proj = projection(p + "self_attn.k_proj", normal({K * D, C}, s_.init_std), 0);
      if (qkv_bias) l.k_bias = column_bias(p + "self_attn.k_proj.bias", K * D);
      l.v_proj = projection(p + "self_attn.v_proj", normal({K * D, C}, s_.init_std), 0);
      if (qkv_bias) l.v_bias = column_bias(p + "self_attn.v_proj.bias", K * D);
      l.o_proj = projection(p + "self_attn.o_proj", normal({C, H * D}, proj_std), 1);
      if (o_bias) l.o_bias = add_param(p + "self_attn.o_proj.bias", filled(C, 0.0), kNoDecay);
      if (s_.head_norm == HeadNorm::rms) {
        l.q_norm = add_param(p + "self_attn.q_norm.weight", filled(D, 1.0), kNoDecay);
        l.k_norm = add_param(p + "self_attn.k_norm.weight", filled(D, 1.0), kNoDecay);
      }
      l.sparse = s_.moe.any() && s_.moe.sparse[static_cast<size_t>(i)];
      if (l.sparse) {
        l.moe = add_moe(p, C, normal, proj_std, ctx);
      } else {
        l.gate_proj = projection(p + "mlp.gate_proj", normal({F, C}, s_.init_std), 0);
        l.up_proj = projection(p + "mlp.up_proj", normal({F, C}, s_.init_std), 0);
        l.down_proj = projection(p + "mlp.down_proj", normal({C, F}, proj_std), 1);
      }
      l.input_norm = param(p + "input_layernorm.weight", filled(C, 1.0), kNoDecay);
      l.post_norm = param(p + "post_attention_layernorm.weight", filled(C, 1.0), kNoDecay);
      layers_.push_back(l);
      end_unit();
    }
    norm_ = param("model.norm.weight", filled(C, 1.0), kNoDecay);                                  // (C)
    if (!s_.tie_embeddings) matmul_params_ += V * C;
    lm_head_ = s_.tie_embeddings ? embed_ : add_split_param("lm_head.weight", normal({V, C}, s_.init_std), 0, ctx);  // (V/T, C)
    // No shared causal bias: at long seq_len it would outweigh the model (4 seq_len^2 bytes), and
    // attention makes what a call needs (attention.hpp causal_attention).
    set_shape(s_.component, s_.seq_len, s_.vocab_size, at::Tensor());
    rope_ = Rope(s_.seq_len, D, s_.rope_theta, device, s_.rope_scaling);                                // (T, D)
  }

  double flops_per_token() const override {
    return loom_gpt::flops_per_token(matmul_params_, s_.n_layer, s_.n_head * s_.head_dim, s_.seq_len);
  }

  std::string hugging_face() const override { return nlohmann::json{{"config", llama_hf_config(s_)}}.dump(); }

 private:
  // A sparse layer's router and experts (and Qwen2-MoE's shared expert), in the Hub's names.
  // The FLOPs count what a token computes: the router, k experts, the shared expert.
  template <class Normal>
  MoeWeights add_moe(const std::string& prefix, int64_t C, const Normal& normal, double proj_std,
                     const loom::Context& ctx) {
    const MoeSpec& m = s_.moe;
    const MoeNames names(prefix, m.mixtral_names);
    const int64_t Fe = m.expert_hidden, Fs = m.shared_hidden;
    for (const std::string& weight : {names.gate(0), names.up(0), names.down(0)}) {
      const std::string module = weight.substr(0, weight.rfind(".weight"));
      require(!ctx.adapters.targets_module(module),
              s_.component + ": [lora] targets name " + module + ", an expert of a mixture-of-experts layer; LoRA on "
                  "experts is not built: target the attention projections (q_proj, k_proj, v_proj, o_proj)");
    }
    MoeWeights w;
    w.router = add_param(names.router, normal({m.experts, C}, s_.init_std), 0);
    // Every expert is drawn, so each keeps the values it has at any E; a rank keeps its own.
    const auto keep = [&](std::vector<at::Tensor>& into, const std::string& name, at::Tensor init, int64_t e) {
      if (at::Tensor t = add_expert_param(name, std::move(init), e, m.experts, ctx); t.defined()) into.push_back(t);
      else held_elsewhere_.push_back(name);
    };
    for (int64_t e = 0; e < m.experts; ++e) {
      keep(w.gate, names.gate(e), normal({Fe, C}, s_.init_std), e);
      keep(w.up, names.up(e), normal({Fe, C}, s_.init_std), e);
      keep(w.down, names.down(e), normal({C, Fe}, proj_std), e);
    }
    matmul_params_ += m.experts * C + m.top_k * 3 * Fe * C;
    if (Fs > 0) {
      w.shared_gate = add_param(names.shared_gate, normal({Fs, C}, s_.init_std), 0);
      w.shared_up = add_param(names.shared_up, normal({Fs, C}, s_.init_std), 0);
      w.shared_down = add_param(names.shared_down, normal({C, Fs}, proj_std), 0);
      w.shared_expert_gate = add_param(names.shared_expert_gate, normal({1, C}, s_.init_std), 0);
      matmul_params_ += 3 * Fs * C + C;
    }
    return w;
  }

  // What a mixture of experts does not compose with yet, refused by name.
  void check_moe_layout(const loom::Context& ctx) const {
    const std::string& who = s_.component;
    require(!tp_.split(), who + ": a mixture of experts under [distributed] tensor_parallel > 1 is not built; "
                                "use tensor_parallel = 1");
    require(sp::Group(ctx).size <= 1 && ctx.context_parallel_size <= 1,
            who + ": a mixture of experts under [distributed] sequence_parallel or context_parallel > 1 is not "
                  "built (the load-balancing loss would see one part of each row); use them at 1");
    const int64_t ranks = ctx.expert_parallel_size;
    require(s_.moe.experts % ranks == 0, who + ": [distributed] expert_parallel = " + std::to_string(ranks) +
                                             " does not divide the " + std::to_string(s_.moe.experts) +
                                             " experts; choose a divisor of them");
    if (ranks > 1)
      loom::log(LOOM_LOG_LEVEL_INFO, who,
                "expert rank " + std::to_string(ctx.expert_parallel_rank) + " of " + std::to_string(ranks) +
                    " computes experts " + std::to_string(ctx.expert_parallel_rank * s_.moe.experts / ranks) + ".." +
                    std::to_string((ctx.expert_parallel_rank + 1) * s_.moe.experts / ranks - 1) +
                    " of every sparse layer");
  }

 public:
  // A mixture of experts computes its experts over the expert-parallel group (moe.hpp).
  bool expert_parallel() const override { return s_.moe.any(); }
  // Pipeline stages (ABI 1.17) for dense models: a mixture of experts' load-balancing loss
  // would need the routers of every stage on the last one (not built).
  int64_t pipeline_layers() const override { return s_.moe.any() ? 0 : layer_count(); }

 private:
  // The mixture of experts' auxiliary loss, from the routers of the forward just run
  // (moe.hpp): reported, per layer its load imbalance (the busiest expert's tokens over the
  // mean) and router entropy, and, when the config asks for it (output_router_logits) and the
  // model trains, router_aux_loss_coef times it per labelled token added to the loss sum, as
  // transformers adds it to the mean loss.
  at::Tensor extra_loss_sum(const at::Tensor& targets, const at::Tensor& mask) override {
    if (routers_.empty()) return {};
    const MoeSpec& m = s_.moe;
    const at::Tensor flat_mask = mask.defined() ? mask.reshape({-1}).ne(0) : at::Tensor();
    const at::Tensor aux = load_balancing_loss(routers_, m.experts, m.top_k, flat_mask);
    report("moe_aux_loss", aux.detach());
    for (size_t i = 0, layer = 0; i < layers_.size(); ++i) {
      if (!layers_[i].sparse) continue;
      const at::Tensor load = loom_ops::tokens_per_expert(chosen_[layer], m.experts).to(at::kFloat);
      const at::Tensor p = at::softmax(routers_[layer].detach(), -1, at::kFloat);
      const std::string name = "moe_layer" + std::to_string(i);
      report(name + "_imbalance", load.max() / load.mean());
      report(name + "_router_entropy", -(p * p.clamp_min(1e-30).log()).sum(-1).mean());
      ++layer;
    }
    if (!m.aux_loss_in_loss || !training_) return {};
    return aux * (m.aux_loss_coef * targets.ne(LOOM_IGNORE_INDEX).sum().to(at::kFloat));  // per labelled token
  }

  // inputs: (B, T) -> the final RMSNorm's output (B, T, C); the routers of this forward are
  // what extra_loss_sum reads.
  at::Tensor hidden(const at::Tensor& inputs, const Layout& layout) const override {
    routers_.clear();
    chosen_.clear();
    return CausalLm::hidden(inputs, layout);
  }
  int64_t layer_count() const override { return static_cast<int64_t>(layers_.size()); }
  at::Tensor embed(const at::Tensor& inputs, const Layout&) const override {
    return tp::embedding(embed_, inputs, tp_, s_.padding_idx);  // (B, T, C)
  }
  at::Tensor final_norm(const at::Tensor& x) const override { return rms_norm(x, norm_, s_.rms_norm_eps); }
  at::Tensor run_layers(at::Tensor x, const Layout& layout, int64_t begin, int64_t end) const override {
    for (size_t i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
      // By value: a recomputed layer runs again in backward, after this call has returned.
      // Its outputs: (B, T, C), and a sparse layer's router logits and chosen experts.
      const auto layer = [this, i, layout](const at::Tensor& in) {
        const Layer& l = layers_[i];
        // The residual add and the norm after it, one op (fused where loom_ops/add_rms_norm.hpp says).
        const auto [y, normed] = loom_ops::add_rms_norm(
            in, attention(l, i, rms_norm(in, l.input_norm, s_.rms_norm_eps), layout), l.post_norm, s_.rms_norm_eps);
        Outputs out = mlp(l, normed);
        out[0] = y + out[0];
        return out;
      };
      x = enter_unit(static_cast<int64_t>(i), x);
      const Outputs out = s_.recompute.applies(i) ? recomputed(layer, x) : layer(x);
      if (out.size() == 3) {  // what extra_loss_sum reads
        routers_.push_back(out[1]);
        chosen_.push_back(out[2]);
      }
      x = exit_unit(static_cast<int64_t>(i), out[0]);
    }
    return x;
  }

  at::Tensor head(const at::Tensor& x) const override { return at::linear(x, lm_head_); }  // (..., V)
  const at::Tensor& head_weight() const override { return lm_head_; }

  // x: (B, T, C) after input_layernorm -> the attention branch (B, T, C). Layer `index` keeps
  // its rotated keys and values in layout.cache when decoding.
  at::Tensor attention(const Layer& l, size_t index, const at::Tensor& x, const Layout& layout) const {
    // Under tensor parallelism H and K are this rank's heads: H/T and K/T.
    const int64_t B = x.size(0), T = x.size(1), H = s_.n_head / tp_.size, K = s_.n_kv_head / tp_.size,
                  D = s_.head_dim;
    const at::Tensor in = tp::enter(x, tp_);
    // Qwen3 normalises each head over D before the rotation (whole weights on this rank's heads).
    const bool head_norm = s_.head_norm == HeadNorm::rms;
    const at::Tensor q_norm = head_norm ? tp::enter(l.q_norm, tp_) : at::Tensor();
    const at::Tensor k_norm = head_norm ? tp::enter(l.k_norm, tp_) : at::Tensor();
    // (B, T, heads, D) -> (norm), rotation, (B, heads, T, D): one op (fused where loom_ops/rope_heads.hpp says).
    at::Tensor q = loom_ops::rope_heads(rope_, l.q_proj(in, l.q_bias, training_).view({B, T, H, D}), layout.positions,
                                        q_norm, s_.rms_norm_eps);                                 // (B, H, T, D)
    at::Tensor k = loom_ops::rope_heads(rope_, l.k_proj(in, l.k_bias, training_).view({B, T, K, D}), layout.positions,
                                        k_norm, s_.rms_norm_eps);                                 // (B, K, T, D)
    at::Tensor v = l.v_proj(in, l.v_bias, training_).view({B, T, K, D}).transpose(1, 2);  // (B, K, T, D)
    if (layout.cache) std::tie(k, v) = layout.cache->append(index, k, v);  // (B, K, S, D) each
    const int64_t window = s_.sliding_windows.empty() ? 0 : s_.sliding_windows[index];
    // Under sequence or context parallelism T is this rank's part of each row (causal_lm.hpp).
    const at::Tensor y = whole_row_attention(q, k, v, layout, s_.dropout, training_, window);  // (B, H, T, D)
    const at::Tensor merged = y.transpose(1, 2).reshape({B, T, H * D});       // (B, T, H*D)
    return maybe_dropout(row_parallel(l.o_proj, merged, l.o_bias), s_.dropout, training_);
  }

  // A row-parallel layer: x W^T summed over the group, then the whole bias (b may be undefined).
  at::Tensor row_parallel(const loom::AdaptedLinear& layer, const at::Tensor& x, const at::Tensor& bias) const {
    if (!tp_.split()) return layer(x, bias, training_);
    return row_parallel_sum(layer(x, at::Tensor(), training_), bias, tp_);
  }

  // x: (B, T, C) after post_attention_layernorm -> {the SwiGLU branch (B, T, C)}, or a sparse
  // layer's {experts' output, router logits (N, E), chosen experts (N, k)}.
  Outputs mlp(const Layer& l, const at::Tensor& x) const {
    if (l.sparse) {
      MoeOutput out = moe_mlp(l.moe, s_.moe, x, ep_);
      return {maybe_dropout(out.y, s_.dropout, training_), out.router_logits, out.chosen};
    }
    const at::Tensor none;  // the MLP has no biases
    const at::Tensor in = tp::enter(x, tp_);
    // silu(gate) * up, one op (fused where loom_ops/swiglu.hpp says): (B, T, F/T)
    const at::Tensor h = loom_ops::swiglu(l.gate_proj(in, none, training_), l.up_proj(in, none, training_));
    return {maybe_dropout(row_parallel(l.down_proj, h, none), s_.dropout, training_)};  // (B, T, C)
  }

  LlamaSpec s_;
  tp::Group tp_;               // this rank's tensor-parallel group (size 1: none)
  int64_t matmul_params_ = 0;  // the N of 6N: all but an untied input embedding
  at::Tensor embed_;           // (V, C); (V/T, C) under tensor parallelism, as lm_head_
  std::vector<Layer> layers_;  // L
  at::Tensor norm_;            // (C)
  at::Tensor lm_head_;         // (V, C); the same tensor as embed_ when tied
  Rope rope_;                  // (T, D) cos and sin; buffers
  mutable std::vector<at::Tensor> routers_, chosen_;  // the last forward's, per sparse layer: (N, E), (N, k)
  loom::expert_parallel::Group ep_;  // this rank's expert-parallel group (size 1: every expert here)
};

LlamaSpec spec_from_options(const loom::Config& c, const loom::Context& ctx) {
  LlamaSpec s;
  s.vocab_size = c.i64("vocab_size");
  s.n_layer = c.i64("n_layer");
  s.n_head = c.i64("n_head");
  s.n_kv_head = c.i64("n_kv_head") == 0 ? s.n_head : c.i64("n_kv_head");
  s.n_embd = c.i64("n_embd");
  s.seq_len = c.i64("seq_len");
  s.ffn_hidden = c.i64("ffn_hidden") == 0 ? llama_ffn_hidden(s.n_embd) : c.i64("ffn_hidden");
  s.rope_theta = c.f64("rope_theta");
  s.rms_norm_eps = c.f64("rms_norm_eps");
  s.dropout = c.f64("dropout");
  s.tie_embeddings = c.flag("tie_embeddings");
  s.init_std = c.f64("init_std");
  s.head_norm = c.flag("qk_norm") ? HeadNorm::rms : HeadNorm::none;
  s.bias = c.flag("qkv_bias") ? ProjectionBias::qkv : ProjectionBias::none;
  require(s.n_head >= 1, "llama: n_head must be at least 1, got " + std::to_string(s.n_head));
  require(s.n_embd >= 1 && s.n_embd % s.n_head == 0, "llama: n_embd (" + std::to_string(s.n_embd) +
                                                         ") must be a positive multiple of n_head (" +
                                                         std::to_string(s.n_head) + "); change n_embd or n_head");
  s.head_dim = c.i64("head_dim") > 0 ? c.i64("head_dim") : s.n_embd / s.n_head;
  require(s.head_dim % 2 == 0, "llama: the head dim " + std::to_string(s.head_dim) +
                                   " must be even for rotary embeddings; change head_dim, n_embd or n_head");
  s.recompute = recompute_policy_from(c);
  s.seed = ctx.seed;
  return s;
}

// The `llama` component: the model configured by manifest options.
class Llama final : public LlamaModel {
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
      loom::option("head_dim", LOOM_OPTION_TYPE_INT, "0", "Width of each head; 0: n_embd / n_head (Qwen3 sets it apart)."),
      loom::option("qk_norm", LOOM_OPTION_TYPE_BOOL, "false",
                   "RMSNorm on each head's queries and keys (Qwen3); exports as Qwen3ForCausalLM."),
      loom::option("qkv_bias", LOOM_OPTION_TYPE_BOOL, "false",
                   "Biases on q/k/v projections (Qwen2); without qk_norm exports as Qwen2ForCausalLM."),
      kActivationCheckpointingOption,
      kCheckpointEveryOption,
      kCudaKernelsOption,
  };

  Llama(const loom::Config& c, const loom::Context& ctx) : LlamaModel(spec_from_options(c, ctx), ctx) {
    use_cuda_kernels_from(c, ctx, name);
  }
};

}  // namespace

void check_llama_spec(const LlamaSpec& s) {
  const std::string& who = s.component;
  require(s.vocab_size >= 2, who + ": vocab_size must be at least 2, got " + std::to_string(s.vocab_size));
  require(s.n_layer >= 1, who + ": n_layer must be at least 1, got " + std::to_string(s.n_layer));
  require(s.n_head >= 1, who + ": n_head must be at least 1, got " + std::to_string(s.n_head));
  require(s.n_embd >= 1, who + ": n_embd must be at least 1, got " + std::to_string(s.n_embd));
  require(s.head_dim >= 2 && s.head_dim % 2 == 0, who + ": the head dim " + std::to_string(s.head_dim) +
                                                      " must be even for rotary embeddings; change n_embd or n_head");
  require(s.n_kv_head >= 1 && s.n_head % s.n_kv_head == 0,
          who + ": n_kv_head (" + std::to_string(s.n_kv_head) + ") must divide n_head (" + std::to_string(s.n_head) +
              "); use a divisor of n_head, or 0 for n_head");
  require(s.ffn_hidden >= 1, who + ": ffn_hidden must be positive, or 0 for the Llama rule; got " +
                                 std::to_string(s.ffn_hidden));
  require(s.seq_len >= 1, who + ": seq_len must be at least 1, got " + std::to_string(s.seq_len));
  require(s.rope_theta > 0.0, who + ": rope_theta must be positive, got " + std::to_string(s.rope_theta));
  require(s.rms_norm_eps > 0.0, who + ": rms_norm_eps must be positive, got " + std::to_string(s.rms_norm_eps));
  require(s.dropout >= 0.0 && s.dropout < 1.0, who + ": dropout must be in [0, 1), got " + std::to_string(s.dropout));
  require(s.init_std > 0.0, who + ": init_std must be positive, got " + std::to_string(s.init_std));
  require(s.sliding_windows.empty() || static_cast<int64_t>(s.sliding_windows.size()) == s.n_layer,
          who + ": sliding windows must be given for every layer or none");
  for (const int64_t window : s.sliding_windows)
    require(window >= 0, who + ": a sliding window must be positive, or 0 for none; got " + std::to_string(window));
  check_recompute_policy(s.recompute, who);
}

std::unique_ptr<loom::Model> make_llama(const LlamaSpec& spec, const loom::Context& ctx) {
  return std::make_unique<LlamaModel>(spec, ctx);
}

const loom_component* llama_component() { return loom::component<Llama>(); }

}  // namespace loom_gpt
