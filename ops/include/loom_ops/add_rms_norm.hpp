// add_rms_norm.hpp: a residual add and the RMSNorm after it, as one op: s = x + delta (the new
// residual stream) and y = rms_norm(s, w, eps) (loom_ops/rms_norm.hpp: normalised in fp32, cast
// back to s's dtype, scaled by w), the pair every Llama-family layer runs twice. Fused, s is
// read once for its norm instead of by six separate kernels.
// On the CPU, contiguous fp32 tensors take a fused path (one pass a row forward, two backward);
// anything else the reference's composition. The CUDA kernels (cuda::add_rms_norm, in
// loom_ops_cuda) are called by name only: the entry point does not take them on CUDA until
// tools/device-check has held them to the reference on a GPU and measured them.
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace loom_ops {

// x, delta: (..., D) of one dtype; w: (D) of the same dtype. Returns (s, y), both differentiable
// (the gradient reaching s and the one reaching y both flow to x and delta).
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                               double eps);

namespace reference {
// (x + delta, rms_norm(x + delta, w, eps)) in LibTorch ops: what every path must match.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                               double eps);
}  // namespace reference

namespace cuda {
// The same on CUDA tensors of float32, bfloat16 or float16 (x, delta and w of one dtype, or a
// bfloat16/float16 delta beside a float32 x and w as autocast's residual stream has it; D at
// most 12288), computed in fp32 by ops/add_rms_norm/add_rms_norm.cu with the reference's roundings
// (s and the normalised value rounded to the dtype before they are used): one block a row,
// forward and backward. Defined in loom_ops_cuda: link it to call this.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                               double eps);
}  // namespace cuda

}  // namespace loom_ops
