// gpt.cpp: GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel computes it: learned
// position embeddings, pre-LayerNorm blocks of causal self-attention and a GELU (tanh
// approximation) MLP, a final LayerNorm, and output logits through the input embedding (tied
// weights). Parameter names and layouts are Hugging Face's, including Conv1D's (in, out) weight
// layout, so exported weights load into GPT2LMHeadModel as they are. The model is built from
// a GptSpec: the `gpt` component fills it from manifest options, `hf_causal_lm` from a
// GPT2LMHeadModel config.json.
//
// It is deliberately not a general transformer: no fused kernels; generation (decode,
// kv_cache.hpp) keeps every position's keys and values.
//
// Tensor parallelism ([distributed] tensor_parallel = T, loom/tensor_parallel.hpp) in
// Megatron-LM's layout: c_attn and c_fc column-parallel (c_attn's q, k and v are three blocks,
// each cut T ways, so a rank holds its H/T heads of each: split_blocks 3), both c_proj
// row-parallel with their biases whole, added once after the sum; wte cut along the
// vocabulary for the lookup and the tied output layer alike; wpe and the LayerNorms whole.
//
// Shapes: B = batch, T = sequence, C = channels (n_embd), H = heads, D = head dim (C / H),
// F = MLP width (n_inner), L = n_layer, V = vocab_size, P = position table rows (n_positions).
#include "gpt2/gpt.hpp"

#include <loom_ops/add_layer_norm.hpp>
#include <loom_ops/gelu_tanh.hpp>
#include <loom_ops/packed_attention.hpp>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "layers/causal_lm.hpp"
#include "layers/cuda_kernels.hpp"
#include "layers/model_common.hpp"
#include "components.hpp"

namespace loom_gpt {

namespace tp = loom::tensor_parallel;
namespace {

constexpr uint32_t kNoDecay = LOOM_PARAM_FLAG_NO_DECAY;

// Hugging Face's Conv1D: y = x W + b with W stored as (in, out). x: (B, T, in) -> (B, T, out).
// b may be undefined (bias = false).
at::Tensor conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const at::Tensor rows = x.reshape({-1, x.size(-1)});                     // (B*T, in)
  const at::Tensor y = b.defined() ? at::addmm(b, rows, w) : at::mm(rows, w);  // (B*T, out)
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = w.size(1);
  return y.view(sizes);  // (B, T, out)
}

// The same through a layer that may carry a LoRA adapter.
at::Tensor conv1d(const at::Tensor& x, const loom::AdaptedLinear& layer, const at::Tensor& b, bool training) {
  return layer.adapt(conv1d(x, layer.weight, b), x, training);
}

struct Block {
  at::Tensor ln_1_w, ln_1_b;            // (C), (C)
  loom::AdaptedLinear c_attn;            // (C, 3C): q, k, v side by side
  at::Tensor c_attn_b;                   // (3C)
  loom::AdaptedLinear attn_proj;         // (C, C)
  at::Tensor attn_proj_b;                // (C)
  at::Tensor ln_2_w, ln_2_b;             // (C), (C)
  loom::AdaptedLinear c_fc;              // (C, F)
  at::Tensor c_fc_b;                     // (F)
  loom::AdaptedLinear mlp_proj;          // (F, C)
  at::Tensor mlp_proj_b;                 // (C)
  // Under tensor parallelism c_attn and its bias hold (C, 3C/T) and (3C/T), c_fc and its
  // bias (C, F/T) and (F/T), the c_proj weights (C/T, C) and (F/T, C).
};

class GptModel : public CausalLm {
 public:
  GptModel(const GptSpec& spec, const loom::Context& ctx) : s_(spec), tp_(ctx) {
    check_gpt_spec(s_);
    check_tensor_split(s_.component, tp_,
                       {{s_.n_head, "the heads (n_head)"}, {s_.n_inner, "the MLP width (n_inner)"},
                        {s_.vocab_size, "the vocabulary (vocab_size)"}},
                       s_.dropout);
    set_tensor_parallel(tp_);
    set_sequence_parallel(loom::sequence_parallel::Group(ctx), s_.component, s_.n_head / tp_.size, s_.dropout);
    set_context_parallel(loom::context_parallel::Group(ctx), s_.component, s_.dropout);
    const int64_t V = s_.vocab_size, C = s_.n_embd, F = s_.n_inner, L = s_.n_layer;
    // Own generator: initialization depends on the run seed only, not on what ran before.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(s_.seed);
    const at::Device device(ctx.device);
    const auto normal = [&](at::IntArrayRef shape, double std) {
      return s_.random_init ? at::normal(0.0, std, shape, gen).to(device) : at::empty(shape, device);
    };
    const auto filled = [&](at::IntArrayRef shape, double v) { return at::full(shape, v, device); };
    const double proj_std = s_.init_std / std::sqrt(2.0 * static_cast<double>(L));  // GPT-2's scaled residual init
    // Weight decay applies to the matrices of the blocks (c_attn, c_proj, c_fc) only; embeddings,
    // LayerNorms and biases are exempt, as in minGPT's configure_optimizers.
    const auto param = [&](const std::string& n, at::Tensor init, uint32_t flags) {
      matmul_params_ += init.numel();
      return add_param(n, std::move(init), flags);
    };
    // A Conv1D weight (in, out), with a LoRA adapter when [lora] targets the module, cut along
    // `split` (1: its outputs, 0: its inputs; `blocks` as add_split_param) under tensor parallelism.
    const auto conv1d_weight = [&](const std::string& module, at::Tensor init, int64_t split, int64_t blocks = 1) {
      matmul_params_ += init.numel();
      return add_split_linear(module, init, split, ctx, loom::WeightLayout::in_out, blocks);
    };
    // Zeros, or none when bias = false; a column-parallel layer's is cut with it (split 0).
    const auto bias = [&](const std::string& n, int64_t size, int64_t split = -1, int64_t blocks = 1) {
      if (!s_.bias) return at::Tensor();
      if (split < 0) return param(n, filled({size}, 0.0), kNoDecay);
      matmul_params_ += size;
      return add_split_param(n, filled({size}, 0.0), split, ctx, kNoDecay, blocks);
    };

    matmul_params_ += V * C;  // (V, C) or its (V/T, C) piece; also the output layer
    wte_ = add_split_param("transformer.wte.weight", normal({V, C}, s_.init_std), 0, ctx, kNoDecay);
    wpe_ = add_param("transformer.wpe.weight", normal({s_.n_positions, C}, s_.init_std), kNoDecay);  // (P, C), lookup
    for (int64_t i = 0; i < L; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      begin_unit(i);  // each block is a unit of [distributed] shard = "parameters"
      Block b;
      b.ln_1_w = param(p + "ln_1.weight", filled({C}, 1.0), kNoDecay);
      b.ln_1_b = bias(p + "ln_1.bias", C);
      b.c_attn = conv1d_weight(p + "attn.c_attn", normal({C, 3 * C}, s_.init_std), 1, 3);
      b.c_attn_b = bias(p + "attn.c_attn.bias", 3 * C, 0, 3);
      b.attn_proj = conv1d_weight(p + "attn.c_proj", normal({C, C}, proj_std), 0);
      b.attn_proj_b = bias(p + "attn.c_proj.bias", C);
      b.ln_2_w = param(p + "ln_2.weight", filled({C}, 1.0), kNoDecay);
      b.ln_2_b = bias(p + "ln_2.bias", C);
      b.c_fc = conv1d_weight(p + "mlp.c_fc", normal({C, F}, s_.init_std), 1);
      b.c_fc_b = bias(p + "mlp.c_fc.bias", F, 0);
      b.mlp_proj = conv1d_weight(p + "mlp.c_proj", normal({F, C}, proj_std), 0);
      b.mlp_proj_b = bias(p + "mlp.c_proj.bias", C);
      blocks_.push_back(b);
      end_unit();
    }
    ln_f_w_ = param("transformer.ln_f.weight", filled({C}, 1.0), kNoDecay);  // (C)
    ln_f_b_ = bias("transformer.ln_f.bias", C);                               // (C)
    set_shape(s_.component, s_.seq_len, s_.vocab_size, causal_mask(s_.seq_len, device));                                  // (T, T)
  }

  double flops_per_token() const override {
    return loom_gpt::flops_per_token(matmul_params_, s_.n_layer, s_.n_embd, s_.seq_len);
  }

  // GPT2LMHeadModel has every bias; without them the weights are not its.
  std::string hugging_face() const override {
    return s_.bias ? nlohmann::json{{"config", gpt_hf_config(s_)}}.dump() : "";
  }

 private:
  // hidden(), inputs (B, T) -> the final LayerNorm's output (B, T, C), in its three parts.
  int64_t layer_count() const override { return static_cast<int64_t>(blocks_.size()); }
  at::Tensor embed(const at::Tensor& inputs, const Layout& layout) const override {
    const at::Tensor positions = layout.positions.defined() ? layout.positions
                                                            : at::arange(inputs.size(1), inputs.options());  // (B, T) or (T)
    const at::Tensor x = tp::embedding(wte_, inputs, tp_) + at::embedding(wpe_, positions);  // (B, T, C)
    return maybe_dropout(x, s_.dropout, training_);
  }
  at::Tensor run_layers(at::Tensor x, const Layout& layout, int64_t begin, int64_t end) const override {
    const int64_t C = s_.n_embd;
    const double eps = s_.layer_norm_eps;
    for (int64_t i = begin; i < end; ++i) {
      // By value: a recomputed block runs again in backward, after this call has returned.
      const auto block = [this, i, layout, C, eps](const at::Tensor& in) {
        const Block& b = blocks_[static_cast<size_t>(i)];
        const at::Tensor branch = attention(b, static_cast<size_t>(i), at::layer_norm(in, {C}, b.ln_1_w, b.ln_1_b, eps), layout);
        // The residual add and ln_2 after it, one op (fused where loom_ops/add_layer_norm.hpp says).
        const auto [y, normed] = loom_ops::add_layer_norm(in, branch, b.ln_2_w, b.ln_2_b, eps);
        return y + mlp(b, normed);  // (B, T, C)
      };
      x = enter_unit(i, x);
      x = s_.recompute.applies(static_cast<size_t>(i)) ? recomputed(block, x) : block(x);
      x = exit_unit(i, x);
    }
    return x;
  }
  at::Tensor final_norm(const at::Tensor& x) const override {
    return at::layer_norm(x, {s_.n_embd}, ln_f_w_, ln_f_b_, s_.layer_norm_eps);  // (B, T, C)
  }

  at::Tensor head(const at::Tensor& x) const override { return at::linear(x, wte_); }  // (..., V or V/T), tied
  const at::Tensor& head_weight() const override { return wte_; }

  // A row-parallel layer (attention's and the MLP's c_proj): its product, summed over the
  // tensor-parallel group, plus the whole bias.
  at::Tensor row_parallel(const loom::AdaptedLinear& layer, const at::Tensor& x, const at::Tensor& bias) const {
    if (!tp_.split()) return conv1d(x, layer, bias, training_);
    return row_parallel_sum(conv1d(x, layer, at::Tensor(), training_), bias, tp_);
  }

  // x: (B, T, C) after ln_1 -> the attention branch (B, T, C). Block `index` keeps its keys
  // and values in layout.cache when decoding. Under tensor parallelism this rank computes its
  // H/T heads (packed and merged hold C/T per q, k and v).
  at::Tensor attention(const Block& b, size_t index, const at::Tensor& x, const Layout& layout) const {
    const at::Tensor packed = conv1d(tp::enter(x, tp_), b.c_attn, b.c_attn_b, training_);  // (B, T, 3C/T)
    // The CPU kernel attends within the rows it is given: not for pieces of rows.
    const bool whole_rows_here = !layout.cache && !takes_parts_of_rows();
    const at::Tensor merged = whole_rows_here && loom_ops::packed_attention_applies(packed, layout.mask, s_.dropout, training_)
                                  ? loom_ops::packed_causal_attention(packed, s_.n_head / tp_.size, layout.mask)  // CPU training: no copies
                                  : split_heads_attention(packed, index, layout);
    return maybe_dropout(row_parallel(b.attn_proj, merged, b.attn_proj_b), s_.dropout, training_);
  }

  // packed: (B, T, 3C) -> (B, T, C), the heads as (B, H, T, D) tensors (decoding, dropout, CUDA);
  // C/T and H/T of them under tensor parallelism.
  at::Tensor split_heads_attention(const at::Tensor& packed, size_t index, const Layout& layout) const {
    const int64_t B = packed.size(0), T = packed.size(1), C = s_.n_embd / tp_.size, H = s_.n_head / tp_.size,
                  D = C / H;
    const std::vector<at::Tensor> qkv = packed.split(C, -1);  // 3 x (B, T, C)
    const at::Tensor q = qkv[0].view({B, T, H, D}).transpose(1, 2);                       // (B, H, T, D)
    at::Tensor k = qkv[1].view({B, T, H, D}).transpose(1, 2);                             // (B, H, T, D)
    at::Tensor v = qkv[2].view({B, T, H, D}).transpose(1, 2);                             // (B, H, T, D)
    if (layout.cache) std::tie(k, v) = layout.cache->append(index, k, v);                 // (B, H, S, D) each
    // Under sequence or context parallelism T is this rank's part of each row (causal_lm.hpp).
    const at::Tensor y = whole_row_attention(q, k, v, layout, s_.dropout, training_);   // (B, H, T, D)
    return y.transpose(1, 2).reshape({B, T, C});                                          // (B, T, C)
  }

  // x: (B, T, C) after ln_2 -> the MLP branch (B, T, C).
  at::Tensor mlp(const Block& b, const at::Tensor& x) const {
    const at::Tensor h = loom_ops::gelu_tanh(conv1d(tp::enter(x, tp_), b.c_fc, b.c_fc_b, training_));  // (B, T, F or F/T)
    return maybe_dropout(row_parallel(b.mlp_proj, h, b.mlp_proj_b), s_.dropout, training_);
  }

  GptSpec s_;
  tp::Group tp_;               // this rank's tensor-parallel group (size 1: none)
  int64_t matmul_params_ = 0;  // every parameter but wpe: the N of 6N
  at::Tensor wte_;             // (V, C); (V/T, C) under tensor parallelism
  at::Tensor wpe_;             // (P, C)
  std::vector<Block> blocks_;  // L
  at::Tensor ln_f_w_, ln_f_b_; // (C), (C)
};

// The `gpt` component: the model configured by manifest options.
class Gpt final : public GptModel {
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
      kActivationCheckpointingOption,
      kCheckpointEveryOption,
      kCudaKernelsOption,
  };

  Gpt(const loom::Config& c, const loom::Context& ctx) : GptModel(spec_from_options(c, ctx), ctx) {
    use_cuda_kernels_from(c, ctx, name);
  }

 private:
  static GptSpec spec_from_options(const loom::Config& c, const loom::Context& ctx) {
    GptSpec s;
    s.vocab_size = c.i64("vocab_size");
    s.n_layer = c.i64("n_layer");
    s.n_head = c.i64("n_head");
    s.n_embd = c.i64("n_embd");
    s.seq_len = s.n_positions = c.i64("seq_len");
    s.n_inner = 4 * s.n_embd;
    s.dropout = c.f64("dropout");
    s.bias = c.flag("bias");
    s.init_std = c.f64("init_std");
    s.recompute = recompute_policy_from(c);
    s.seed = ctx.seed;
    return s;
  }
};

}  // namespace

void check_gpt_spec(const GptSpec& s) {
  const std::string& who = s.component;
  require(s.vocab_size >= 2, who + ": vocab_size must be at least 2, got " + std::to_string(s.vocab_size));
  require(s.n_layer >= 1, who + ": n_layer must be at least 1, got " + std::to_string(s.n_layer));
  require(s.n_head >= 1, who + ": n_head must be at least 1, got " + std::to_string(s.n_head));
  require(s.n_embd >= 1 && s.n_embd % s.n_head == 0, who + ": n_embd (" + std::to_string(s.n_embd) +
                                                         ") must be a positive multiple of " + "n_head (" +
                                                         std::to_string(s.n_head) + "); change n_embd or n_head");
  require(s.seq_len >= 1, who + ": seq_len must be at least 1, got " + std::to_string(s.seq_len));
  require(s.n_positions >= s.seq_len, who + ": seq_len " + std::to_string(s.seq_len) +
                                          " exceeds the position table's " + std::to_string(s.n_positions) + " rows");
  require(s.n_inner >= 1, who + ": n_inner must be positive");
  require(s.layer_norm_eps > 0.0, who + ": layer_norm_epsilon must be positive");
  require(s.dropout >= 0.0 && s.dropout < 1.0, who + ": dropout must be in [0, 1), got " + std::to_string(s.dropout));
  require(s.init_std > 0.0, who + ": init_std must be positive, got " + std::to_string(s.init_std));
  check_recompute_policy(s.recompute, who);
}

std::unique_ptr<loom::Model> make_gpt(const GptSpec& spec, const loom::Context& ctx) {
  return std::make_unique<GptModel>(spec, ctx);
}

const loom_component* gpt_component() { return loom::component<Gpt>(); }

}  // namespace loom_gpt
