// add_rms_norm_check.hpp: what the CPU and GPU tests of add_rms_norm (ops/add_rms_norm/) both
// measure: a path's (s, y) and the gradients of sum(s a) + sum(y b) against the reference in
// double, so that both of its outputs send gradients back.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/add_rms_norm.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <vector>

#include "largest_error.hpp"

namespace loom_ops_test {

using AddRmsNorm = std::function<std::pair<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                     const at::Tensor&, double)>;

// s, y, then the gradients of x, delta and w; `b` alone when a is undefined (s used nowhere else).
inline std::vector<at::Tensor> add_rms_norm_outputs(const AddRmsNorm& f, const at::Tensor& x, const at::Tensor& delta,
                                                    const at::Tensor& w, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor xi = x.detach().clone().requires_grad_(true), di = delta.detach().clone().requires_grad_(true);
  const at::Tensor wi = w.detach().clone().requires_grad_(true);
  const auto [s, y] = f(xi, di, wi, 1e-6);
  const at::Tensor loss = a.defined() ? (s * a.to(s.scalar_type())).sum() + (y * b.to(y.scalar_type())).sum()
                                      : (y * b.to(y.scalar_type())).sum();
  const auto grads = torch::autograd::grad({loss}, {xi, di, wi});
  return {s.detach(), y.detach(), grads[0], grads[1], grads[2]};
}

// The largest error of each of the five against the reference computed in double.
inline std::vector<double> add_rms_norm_errors(const AddRmsNorm& f, const at::Tensor& x, const at::Tensor& delta,
                                               const at::Tensor& w, const at::Tensor& a, const at::Tensor& b) {
  const auto got = add_rms_norm_outputs(f, x, delta, w, a, b);
  const auto want = add_rms_norm_outputs(loom_ops::reference::add_rms_norm, x.to(at::kDouble), delta.to(at::kDouble),
                                         w.to(at::kDouble), a.defined() ? a.to(at::kDouble) : a, b.to(at::kDouble));
  std::vector<double> out;
  for (size_t k = 0; k < got.size(); ++k) out.push_back(largest_error(got[k], want[k].to(got[k].device())));
  return out;
}

}  // namespace loom_ops_test
