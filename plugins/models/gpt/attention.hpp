// attention.hpp: causal self-attention through LibTorch's fused kernels and rotary position
// embeddings in Hugging Face's "rotate_half" layout, shared by the `gpt` and `llama` components. Header-only, in the
// plugin-local namespace loom_gpt; the plugin exports nothing but loom_plugin_init.
//
// Shapes: B = batch, T = sequence, C = channels (n_embd), H = query heads, K = key/value heads,
// D = head dim (C / H), V = vocab_size.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace loom_gpt {

// Dropout that costs nothing when off.
inline at::Tensor maybe_dropout(const at::Tensor& x, double p, bool training) {
  return (p > 0.0 && training) ? at::dropout(x, p, /*train=*/true) : x;
}

// The causal mask as an additive bias: 0 where position t may look (s <= t), -inf above the
// diagonal. A buffer, not a parameter; callers slice [:T, :T] for shorter inputs. float32.
// Attention on a plain causal layout never reads it (is_causal says the same to the fused
// kernels); packed documents start from it, and so do decoding steps and the CPU kernel of
// packed_attention.hpp.
inline at::Tensor causal_mask(int64_t block_size, const at::Device& device) {
  const at::Tensor above = at::ones({block_size, block_size}, at::kBool).triu(1);              // (T, T)
  return at::zeros({block_size, block_size}).masked_fill(above, -INFINITY).to(device);         // (T, T)
}

// The causal bias of queries at positions first .. first + T - 1 against keys 0 .. S - 1: 0 where
// the key is not after the query, -inf where it is. (T, S) float32, made for the call.
inline at::Tensor causal_rows(int64_t first, int64_t T, int64_t S, const at::Device& device) {
  const auto positions = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor query_at = at::arange(first, first + T, positions).unsqueeze(1);  // (T, 1)
  const at::Tensor key_at = at::arange(S, positions).unsqueeze(0);                   // (1, S)
  return at::zeros({T, S}, at::TensorOptions().device(device)).masked_fill(key_at > query_at, -INFINITY);
}

// softmax(q k^T / sqrt(D) + mask) v, with dropout on the attention weights, through LibTorch's
// scaled_dot_product_attention: flash attention on CUDA and on the CPU where it applies (the
// (T, S) scores never exist whole), memory-efficient attention for masked rows on CUDA, the
// math path otherwise. tests/threads/sdpa_attention_test.cpp holds it to the math path in double.
// q: (B, H, T, D); k, v: (B, K, S, D) with S >= T: the last T of the S positions are the
// queries' own (S > T when earlier keys and values come from a decoding cache, kv_cache.hpp).
// H is a multiple of K (grouped-query attention: query head h reads key/value head h / (H / K),
// as Hugging Face's repeat_kv); enable_gqa reads the shared heads in place, never repeated.
// mask: the shared (T_max, T_max) causal bias, whose rows S-T..S-1 and columns 0..S-1 apply,
// undefined for the same made only where a call needs it (llama, whose rows may be long enough
// that a whole (T_max, T_max) bias would outweigh the model), or (B, T, S), one per row (packed
// documents, packing.hpp). window > 0: a sliding window
// (Mistral, Qwen2): the query at position t sees keys t - window + 1 .. t only, as transformers'
// sliding_window_overlay (kv_idx > q_idx - window); 0 sees every key before it. Returns (B, H, T, D).
inline at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& mask, double dropout_p, bool training, int64_t window = 0) {
  const int64_t H = q.size(1), K = k.size(1), T = q.size(2), S = k.size(2);
  const double p = training ? dropout_p : 0.0;
  const bool gqa = K != H;
  const bool windowed = window > 0 && window < S;  // a window of S or more hides nothing
  const bool shared = !mask.defined() || mask.dim() == 2;  // the causal bias, not one per row
  if (shared && S == T && !windowed)  // the plain causal layout: no mask tensor, the kernels know it
    return at::scaled_dot_product_attention(q, k, v, c10::nullopt, p, /*is_causal=*/true, c10::nullopt, gqa);
  if (shared && T == 1 && !windowed)  // one new token sees every cached position
    return at::scaled_dot_product_attention(q, k, v, c10::nullopt, p, /*is_causal=*/false, c10::nullopt, gqa);
  at::Tensor bias = !mask.defined() ? causal_rows(S - T, T, S, q.device())           // (T, S)
                    : mask.dim() == 3 ? mask.unsqueeze(1)                              // (B, 1, T, S)
                                      : mask.narrow(0, S - T, T).narrow(1, 0, S);      // (T, S)
  if (windowed) {
    const auto positions = at::TensorOptions().dtype(at::kLong).device(q.device());
    const at::Tensor query_at = at::arange(S - T, S, positions).unsqueeze(1);  // (T, 1)
    const at::Tensor key_at = at::arange(S, positions).unsqueeze(0);           // (1, S)
    bias = bias.masked_fill(key_at <= query_at - window, -INFINITY);           // (T, S) or (B, 1, T, S)
  }
  // A float mask must have the queries' dtype (bf16 under autocast); -inf and 0 survive the cast.
  return at::scaled_dot_product_attention(q, k, v, bias.to(q.scalar_type()), p, /*is_causal=*/false, c10::nullopt, gqa);
}

// How the rotary frequencies are stretched for contexts longer than the model was trained on,
// as Hugging Face config.json's rope_scaling names it.
struct RopeScaling {
  enum class Type { none, linear, llama3, yarn };
  Type type = Type::none;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double original_max_positions = 8192.0;                 // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;               // yarn: the rotation counts bounding the ramp
  bool truncate = true;                                   // yarn: whole dimensions at the ramp's ends
  double attention_factor = 1.0;  // cos and sin are multiplied by it (yarn's mscale; 1 otherwise)
};

// YaRN (Peng et al. 2023, arXiv:2309.00071) as transformers computes it: dimensions that turn
// fewer than beta_slow times over the original context are interpolated (divided by factor),
// those turning more than beta_fast times kept, a linear ramp between; the ramp's ends are
// dimension indices d where d = D ln(original / (2 pi rotations)) / (2 ln theta), rounded
// outwards when truncate. (The attention factor scales cos and sin, in Rope.)
inline at::Tensor yarn_inv_freq(const at::Tensor& inv_freq, int64_t head_dim, double theta, const RopeScaling& s) {
  const double D = static_cast<double>(head_dim);
  const auto dim_of = [&](double rotations) {
    return D * std::log(s.original_max_positions / (rotations * 2.0 * M_PI)) / (2.0 * std::log(theta));
  };
  double low = dim_of(s.beta_fast), high = dim_of(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, D - 1.0);
  if (low == high) high += 0.001;  // as transformers: no division by zero
  const at::Tensor ramp = ((at::arange(head_dim / 2, inv_freq.options()) - low) / (high - low)).clamp(0.0, 1.0);
  const at::Tensor kept = 1.0 - ramp;  // the extrapolated share of each dimension
  return inv_freq / s.factor * (1.0 - kept) + inv_freq * kept;
}

// inv_freq[i] = theta^(-2i / D) for i < D/2, in double, then scaled:
//   linear: every frequency / factor (positions interpolated, Chen et al. 2023);
//   llama3: as published with Llama 3.1 (Meta's reference apply_scaling): wavelengths 2 pi / f
//     shorter than original / high_freq_factor stay, longer than original / low_freq_factor
//     are divided by factor, and those between blend the two with
//     smooth = (original / wavelength - low) / (high - low).
inline at::Tensor rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor exponents = at::arange(0, head_dim, 2, f64) / static_cast<double>(head_dim);  // (D/2)
  at::Tensor inv_freq = at::pow(theta, -exponents);                                                // (D/2)
  if (scaling.type == RopeScaling::Type::linear) return inv_freq / scaling.factor;
  if (scaling.type == RopeScaling::Type::yarn) return yarn_inv_freq(inv_freq, head_dim, theta, scaling);
  if (scaling.type != RopeScaling::Type::llama3) return inv_freq;
  const double low_wavelen = scaling.original_max_positions / scaling.low_freq_factor;
  const double high_wavelen = scaling.original_max_positions / scaling.high_freq_factor;
  const at::Tensor wavelen = 2.0 * M_PI / inv_freq;
  const at::Tensor smooth = (scaling.original_max_positions / wavelen - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
  const at::Tensor blended = (1.0 - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
  return at::where(wavelen < high_wavelen, inv_freq, at::where(wavelen > low_wavelen, inv_freq / scaling.factor, blended));
}

// Rotary position embeddings (Su et al. 2021) as Hugging Face Llama lays them out: the
// rotation pairs channel i with channel i + D/2 (not 2i with 2i+1 as Meta's original), so
// q and k projections exported under HF names need no permutation.
struct Rope {
  at::Tensor cos, sin;  // (T, D) each; buffers, not parameters

  Rope() = default;
  Rope(int64_t block_size, int64_t head_dim, double theta, const at::Device& device,
       const RopeScaling& scaling = RopeScaling()) {
    const at::Tensor inv_freq = rope_inv_freq(head_dim, theta, scaling);                                     // (D/2)
    const at::Tensor angles = at::outer(at::arange(block_size, at::TensorOptions().dtype(at::kDouble)), inv_freq);  // (T, D/2)
    const at::Tensor both = at::cat({angles, angles}, -1);                                                   // (T, D)
    cos = (both.cos() * scaling.attention_factor).to(at::kFloat).to(device);
    sin = (both.sin() * scaling.attention_factor).to(at::kFloat).to(device);
  }

  // x: (B, heads, T, D) -> same shape, each position rotated by its angles. positions: (B, T)
  // int64 (packed documents), or undefined for 0..T-1 on every row.
  at::Tensor apply(const at::Tensor& x, const at::Tensor& positions = at::Tensor()) const {
    const int64_t B = x.size(0), T = x.size(2), D = x.size(3), half = D / 2;
    const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);  // rotate_half
    if (!positions.defined())
      return x * cos.narrow(0, 0, T).to(x.scalar_type()) + rotated * sin.narrow(0, 0, T).to(x.scalar_type());
    const at::Tensor index = positions.reshape({-1});
    const at::Tensor c = cos.index_select(0, index).view({B, 1, T, D}).to(x.scalar_type());  // (B, 1, T, D)
    const at::Tensor s = sin.index_select(0, index).view({B, 1, T, D}).to(x.scalar_type());  // (B, 1, T, D)
    return x * c + rotated * s;
  }
};

}  // namespace loom_gpt
