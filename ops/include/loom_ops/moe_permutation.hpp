// moe_permutation.hpp: the token permutation around a mixture of experts' grouped products.
// Each of N tokens chooses k experts; the N k (token, choice) pairs, pair p being token p / k's
// choice p % k, run through the experts sorted by expert, and order (N k, int64) lists the pairs
// in that sorted order (position i holds pair order[i]).
//   moe_permute(x, order, k): the experts' input rows, row i = x[order[i] / k].
//   moe_combine(rows, order, top): each token's output, the sum over its k choices of the row
//     its expert computed times the choice's weight top[n, j].
// The composition (index_select; a product, zeros and index_add) writes every weighted row
// before summing it, and both its sums scatter into zeros: atomics on a GPU, so in no fixed
// order. Here each sum gathers a token's k rows and adds them in position order: one pass,
// deterministic, and in fp32 on the CPU bit for bit the composition's values.
// On the CPU, contiguous fp32 rows take fused loops; anything else the reference. order must be
// a permutation of 0 .. N k - 1 (refused by name otherwise on the CPU path). The CUDA kernels
// (cuda::moe_permute, cuda::moe_combine, in loom_ops_cuda) are called by name only until
// tools/device-check has held them to the reference on a GPU.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops {

// x: (N, C); order: (N k) int64 -> (N k, C), differentiable in x.
at::Tensor moe_permute(const at::Tensor& x, const at::Tensor& order, int64_t k);
// rows: (N k, C) in order's positions; top: (N, k), rows' dtype -> (N, C), differentiable in rows and top.
at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top);

namespace reference {
// x.index_select(0, order / k).
at::Tensor moe_permute(const at::Tensor& x, const at::Tensor& order, int64_t k);
// zeros(N, C).index_add(0, order / k, rows * top.reshape(-1)[order]).
at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top);
}  // namespace reference

namespace cuda {
// The same on CUDA tensors of float32, bfloat16 or float16 (ops/moe_permutation/*.cu): sums in
// fp32 over each token's rows in position order, rounded once; no atomics. Defined in
// loom_ops_cuda: link it to call these.
at::Tensor moe_permute(const at::Tensor& x, const at::Tensor& order, int64_t k);
at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top);
}  // namespace cuda

}  // namespace loom_ops
