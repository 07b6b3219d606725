// attention.hpp: causal self-attention through LibTorch's fused kernels, shared by the `gpt`
// and `llama` components (rotary position embeddings: loom_ops/rotary.hpp). Header-only, in the
// plugin-local namespace loom_gpt; the plugin exports nothing but loom_plugin_init.
//
// Shapes: B = batch, T = sequence, C = channels (n_embd), H = query heads, K = key/value heads,
// D = head dim (C / H), V = vocab_size.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/rotary.hpp>

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

// The rotary tables and their scaling rules are an op (loom_ops/rotary.hpp); the models use
// them under these names.
using loom_ops::Rope;
using loom_ops::RopeScaling;

}  // namespace loom_gpt
