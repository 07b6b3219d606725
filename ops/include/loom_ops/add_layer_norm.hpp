// add_layer_norm.hpp: a residual add and the LayerNorm after it, as one op: s = x + delta (the
// new residual stream) and y = layer_norm(s, w, b, eps) over the last dimension, the pair every
// GPT-2 block runs between its attention and its MLP. Fused, s is written once and read back
// from cache for its statistics instead of by separate kernels.
// The entry point is the reference on every device today. The CUDA kernels
// (cuda::add_layer_norm, in loom_ops_cuda) are called by name only until tools/device-check has
// held them to the reference on a GPU and measured them. The CPU loops (fused_cpu::add_layer_norm)
// run the kernels' formulas where CPU tests check them, but at::layer_norm's own CPU backward is
// faster than theirs (0.74-0.88x, loom_bench_ops), so the entry point does not take them.
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace loom_ops {

// x, delta: (..., D) of one dtype; w: (D) of that dtype; b: (D) of that dtype, or undefined for
// no bias. Returns (s, y), both differentiable (the gradients reaching s and y both flow to x
// and delta; y's to w and b).
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps);

namespace reference {
// (x + delta, at::layer_norm(x + delta, {D}, w, b, eps)): what every path must match.
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps);
}  // namespace reference

namespace fused_cpu {
// The same on contiguous fp32 CPU tensors (others refused by name), by fused loops: one row at
// a time forward and backward, with cuda_common/layer_norm_math.hpp's formulas.
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps);
}  // namespace fused_cpu

namespace cuda {
// The same on CUDA tensors of float32, bfloat16 or float16 (one dtype, or a bfloat16/float16
// delta beside float32 others as autocast's residual stream has it; D at most 6144),
// computed in fp32 by ops/add_layer_norm/add_layer_norm.cu with the reference's roundings (s
// rounded to the dtype, the norm from it in fp32, y rounded once): one block a row, forward and
// backward. Defined in loom_ops_cuda: link it to call this.
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps);
}  // namespace cuda

}  // namespace loom_ops
