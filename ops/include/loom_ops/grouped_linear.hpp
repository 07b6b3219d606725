// grouped_linear.hpp: the experts' matrix products of a mixture of experts as one grouped
// product. The (token, expert) rows arrive sorted by expert; at::_grouped_mm multiplies each
// expert's contiguous rows by its own weight in one call (CPU and CUDA, fp32/bf16/fp16). Other
// dtypes (float64 in the tests) take one product per expert on the same rows, the reference.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace loom_ops {

// chosen: expert ids (any shape, int64) -> (experts) int64 counts. Unlike at::bincount, no
// host sync on a GPU.
at::Tensor tokens_per_expert(const at::Tensor& chosen, int64_t experts);

// rows: (N, in), each (token, expert) pair's row, sorted by expert; counts: (E) int64 rows per
// expert; weights: E matrices (out, in) on rows' device -> (N, out), each row times
// its expert's weight^T. Differentiable with respect to rows and weights.
at::Tensor grouped_linear(const at::Tensor& rows, const std::vector<at::Tensor>& weights, const at::Tensor& counts);

namespace reference {
// One at::linear per expert on its rows, concatenated (reads counts on the host).
at::Tensor grouped_linear(const at::Tensor& rows, const std::vector<at::Tensor>& weights, const at::Tensor& counts);
}  // namespace reference

}  // namespace loom_ops
