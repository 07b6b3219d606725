// rotary.hpp: rotary position embeddings (Su et al. 2021) in Hugging Face's "rotate_half"
// layout, with the context-stretching rules config.json's rope_scaling names (linear, llama3,
// YaRN). The tables are made in double and kept in fp32; apply() is LibTorch ops on every
// device, its own reference. The models rotate q and k through loom_ops/rope_heads.hpp, which
// fuses the rotation with the per-head norm and the layout attention takes.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace loom_ops {

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
at::Tensor yarn_inv_freq(const at::Tensor& inv_freq, int64_t head_dim, double theta, const RopeScaling& s);

// inv_freq[i] = theta^(-2i / D) for i < D/2, in double, then scaled:
//   linear: every frequency / factor (positions interpolated, Chen et al. 2023);
//   llama3: as published with Llama 3.1 (Meta's reference apply_scaling): wavelengths 2 pi / f
//     shorter than original / high_freq_factor stay, longer than original / low_freq_factor
//     are divided by factor, and those between blend the two with
//     smooth = (original / wavelength - low) / (high - low).
at::Tensor rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling);

// Rotary position embeddings as Hugging Face Llama lays them out: the rotation pairs channel i
// with channel i + D/2 (not 2i with 2i+1 as Meta's original), so q and k projections exported
// under HF names need no permutation.
struct Rope {
  at::Tensor cos, sin;  // (T, D) each; buffers, not parameters

  Rope() = default;
  Rope(int64_t block_size, int64_t head_dim, double theta, const at::Device& device,
       const RopeScaling& scaling = RopeScaling());

  // x: (B, heads, T, D) -> same shape, each position rotated by its angles. positions: (B, T)
  // int64 (packed documents), or undefined for 0..T-1 on every row.
  at::Tensor apply(const at::Tensor& x, const at::Tensor& positions = at::Tensor()) const;
};

}  // namespace loom_ops
