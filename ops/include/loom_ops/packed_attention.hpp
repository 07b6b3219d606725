// packed_attention.hpp: GPT-2's causal self-attention on CPU straight from the fused qkv
// projection, without the head-splitting copies. The textbook path (attention.hpp) reshapes
// q, k and v from (B, T, 3C) to (B H, T, D), which copies each of them, runs LibTorch's bmm
// (on CPU a serial loop of small GEMMs with a view, a check and a dispatch per head: 58-69
// GFLOP/s where one large GEMM reaches 100 on one core here), and copies the output back to
// (B, T, C); backward does the same again. This path runs one matrix product per (batch row,
// head) on strided views into qkv and into the output (LibTorch's addmm: the PyTorch wheels
// export no CBLAS to call directly), the heads split across LibTorch's threads, each product
// single-threaded; softmax and its backward stay LibTorch's. Kept beside
// scaled_dot_product_attention (attention.hpp) because it still measures faster on the CPU in
// fp32: 2-4% at one thread, 7-20% at two, GPT sizes small and medium (tools/bench/README
// "Attention on the CPU"); everything else (CUDA, bf16, dropout, llama, packed rows, decoding)
// takes the fused kernels (the transformer models' attention layer).
// Same arithmetic as attention.hpp's causal_attention (scale and mask added before the softmax),
// except that the products skip the 64 x 64 blocks above the diagonal, whose probabilities
// are exactly 0: the mask must be causal (-inf above the diagonal), as causal_mask makes it.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops {

// Whether packed_causal_attention can take these: contiguous fp32 CPU qkv (B, T, 3C), a 2-D
// (T_max, T_max) mask, no attention dropout.
bool packed_attention_applies(const at::Tensor& qkv, const at::Tensor& mask, double dropout_p, bool training);

// qkv: (B, T, 3C), q | k | v along the last dimension, head h at columns h*D .. h*D+D-1 of
// each; mask: the (T_max, T_max) additive causal bias of causal_mask (rows and columns 0..T-1 apply).
// Returns softmax(q k^T / sqrt(D) + mask) v with the heads merged: (B, T, C). Differentiable once.
at::Tensor packed_causal_attention(const at::Tensor& qkv, int64_t n_head, const at::Tensor& mask);

namespace reference {
// The textbook path in any dtype and on any device: q, k, v split into (B, H, T, D) heads,
// softmax(q k^T / sqrt(D) + mask) v with LibTorch's matmul and softmax, heads merged again.
at::Tensor packed_causal_attention(const at::Tensor& qkv, int64_t n_head, const at::Tensor& mask);
}  // namespace reference

}  // namespace loom_ops
