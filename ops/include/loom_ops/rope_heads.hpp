// rope_heads.hpp: what a Llama-family attention does to q and k between the projection and the
// attention, as one op: the projection's output seen as heads, (B, T, H, D), optionally
// RMS-normalised per head (Qwen3's q_norm and k_norm), rotated by the rotary table
// (loom_ops/rotary.hpp), and laid out as attention takes it, (B, H, T, D) contiguous. The
// composition reads and writes every element five to eight times and hands attention a
// transposed view; fused, each element is read once and written once.
// On the CPU, contiguous fp32 tensors take fused loops (one pass a row forward and backward);
// anything else the reference. The CUDA kernels (cuda::rope_heads, in loom_ops_cuda) are called
// by name only: the entry point does not take them on CUDA until tools/device-check has held
// them to the reference on a GPU and measured them.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/rotary.hpp>

namespace loom_ops {

// x: (B, T, H, D), D = the table's width. positions: (B, T) int64 rows of the table, or
// undefined for 0..T-1 on every row (T at most the table's rows). norm_weight: (D), or undefined
// for no norm; eps: the norm's. Returns (B, H, T, D): rms_norm(x, norm_weight, eps) (or x)
// rotated, with the reference's dtype (x's; x times norm_weight's where there is a norm).
// Differentiable in x and norm_weight.
at::Tensor rope_heads(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                      const at::Tensor& norm_weight, double eps);

namespace reference {
// rope.apply((norm_weight defined ? rms_norm(x, norm_weight, eps) : x).transpose(1, 2), positions):
// the LibTorch composition every path must match.
at::Tensor rope_heads(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                      const at::Tensor& norm_weight, double eps);
}  // namespace reference

namespace cuda {
// The same on CUDA: x of float32, bfloat16 or float16; norm_weight of x's dtype or float32 (the
// output's dtype then), D even and at most 1024. fp32 math with the reference's forward roundings
// (one warp a row), backward in fp32 rounded once. Positions outside the table stop the kernel
// (a device-side trap), as the reference's index_select does. Defined in loom_ops_cuda.
at::Tensor rope_heads(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                      const at::Tensor& norm_weight, double eps);
}  // namespace cuda

}  // namespace loom_ops
