// attention.hpp: causal self-attention in plain ATen ops (LibTorch 1.13 has no
// at::scaled_dot_product_attention) and rotary position embeddings in Hugging Face's
// "rotate_half" layout, shared by the `gpt` and `llama` components. Header-only, in the
// plugin-local namespace loom_gpt; the plugin exports nothing but loom_plugin_init.
//
// Shapes: B = batch, T = sequence, C = channels (n_embd), H = query heads, K = key/value heads,
// D = head dim (C / H), V = vocab_size.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace loom_gpt {

// Dropout that costs nothing when off.
inline at::Tensor maybe_dropout(const at::Tensor& x, double p, bool training) {
  return (p > 0.0 && training) ? at::dropout(x, p, /*train=*/true) : x;
}

// True above the diagonal: position t must not see positions after t. A buffer, not a
// parameter; callers slice [:T, :T] for shorter inputs.
inline at::Tensor causal_mask(int64_t block_size, const at::Device& device) {
  return at::ones({block_size, block_size}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);  // (T, T)
}

// softmax(q k^T / sqrt(D), masked causally) v, with dropout on the attention weights.
// q: (B, H, T, D); k, v: (B, K, T, D) with H a multiple of K (grouped-query attention: query
// head h reads key/value head h / (H / K), as Hugging Face's repeat_kv). Returns (B, H, T, D).
inline at::Tensor causal_attention(const at::Tensor& q, at::Tensor k, at::Tensor v, const at::Tensor& mask,
                                   double dropout_p, bool training) {
  const int64_t H = q.size(1), K = k.size(1), T = q.size(2), D = q.size(3);
  if (K != H) {
    k = k.repeat_interleave(H / K, /*dim=*/1);  // (B, H, T, D)
    v = v.repeat_interleave(H / K, /*dim=*/1);  // (B, H, T, D)
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * scale;                   // (B, H, T, T)
  att = att.masked_fill(mask.narrow(0, 0, T).narrow(1, 0, T), neg_inf);          // (B, H, T, T)
  att = maybe_dropout(at::softmax(att, -1), dropout_p, training);                // (B, H, T, T)
  return at::matmul(att, v);                                                     // (B, H, T, D)
}

// Rotary position embeddings (Su et al. 2021) as Hugging Face Llama lays them out: the
// rotation pairs channel i with channel i + D/2 (not 2i with 2i+1 as Meta's original), so
// q and k projections exported under HF names need no permutation.
struct Rope {
  at::Tensor cos, sin;  // (T, D) each; buffers, not parameters

  Rope() = default;
  Rope(int64_t block_size, int64_t head_dim, double theta, const at::Device& device) {
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    // inv_freq[i] = theta^(-2i / D) for i < D/2, computed in double, stored as float
    const at::Tensor exponents = at::arange(0, head_dim, 2, f64) / static_cast<double>(head_dim);  // (D/2)
    const at::Tensor inv_freq = at::pow(theta, -exponents);                                          // (D/2)
    const at::Tensor angles = at::outer(at::arange(block_size, f64), inv_freq);                      // (T, D/2)
    const at::Tensor both = at::cat({angles, angles}, -1);                                            // (T, D)
    cos = both.cos().to(at::kFloat).to(device);
    sin = both.sin().to(at::kFloat).to(device);
  }

  // x: (B, heads, T, D) -> same shape, each position rotated by its angles.
  at::Tensor apply(const at::Tensor& x) const {
    const int64_t T = x.size(2), half = x.size(3) / 2;
    const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);  // rotate_half
    return x * cos.narrow(0, 0, T).to(x.scalar_type()) + rotated * sin.narrow(0, 0, T).to(x.scalar_type());
  }
};

}  // namespace loom_gpt
