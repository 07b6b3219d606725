// add_rms_norm_launches.hpp: the ATen side of add_rms_norm.cu's two kernels, shared by the fused
// residual add + RMSNorm (add_rms_norm_cuda.cpp) and RMSNorm alone (ops/rms_norm/rms_norm_cuda.cpp,
// which runs the same kernels with no delta). Contiguous CUDA tensors, checked by the callers.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops::cuda::add_rms_norm_launch {

// Refuses by name (op) rows wider than the kernels take (kAddRmsNormMostColumns).
void check_columns(const at::Tensor& x, const char* op);

struct Forward {
  at::Tensor s;            // x + delta in x's dtype; undefined without delta (then s is x)
  at::Tensor y;            // the normalised, scaled rows, x's dtype
  at::Tensor inverse_rms;  // (rows) float32, what backward reads
};
// delta: x's shape, x's dtype or its narrower branch (narrower_branch), or undefined.
Forward forward(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w, double eps, const char* op);

struct Backward {
  at::Tensor ds;  // the gradient of s (of x and of delta), s's dtype
  at::Tensor dw;  // w's dtype
};
// s: what forward normalised (its s, or x without delta); dy: the gradient of y in s's dtype;
// ds_in: the gradient of s from its other uses, or undefined.
Backward backward(const at::Tensor& s, const at::Tensor& w, const at::Tensor& inverse_rms, const at::Tensor& dy,
                  const at::Tensor& ds_in, const char* op);

}  // namespace loom_ops::cuda::add_rms_norm_launch
