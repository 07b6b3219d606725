// add_norm_check.hpp: what the CPU and GPU tests of the fused residual add + norm ops
// (ops/add_rms_norm/, ops/add_layer_norm/) measure: a path's (s, y) and the gradients of
// sum(s a) + sum(y gy) against the op's reference in double, so that both of its outputs send
// gradients back.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/add_layer_norm.hpp>
#include <loom_ops/add_rms_norm.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <vector>

#include "largest_error.hpp"

namespace loom_ops_test {

// (x, delta, w, bias or undefined, eps) -> (s, y)
using AddNorm = std::function<std::pair<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                  const at::Tensor&, const at::Tensor&, double)>;
using AddRmsNorm = std::function<std::pair<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                     const at::Tensor&, double)>;

// add_rms_norm's signature seen as AddNorm (it has no bias).
inline AddNorm without_bias(const AddRmsNorm& f) {
  return [f](const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w, const at::Tensor&, double eps) {
    return f(x, delta, w, eps);
  };
}

// s, y, then the gradients of x, delta, w and (when bias is defined) bias; `gy` alone when a is
// undefined (s used nowhere else).
inline std::vector<at::Tensor> add_norm_outputs(const AddNorm& f, const at::Tensor& x, const at::Tensor& delta,
                                                const at::Tensor& w, const at::Tensor& bias, const at::Tensor& a,
                                                const at::Tensor& gy) {
  const at::Tensor xi = x.detach().clone().requires_grad_(true), di = delta.detach().clone().requires_grad_(true);
  const at::Tensor wi = w.detach().clone().requires_grad_(true);
  const at::Tensor bi = bias.defined() ? bias.detach().clone().requires_grad_(true) : at::Tensor();
  const auto [s, y] = f(xi, di, wi, bi, 1e-6);
  const at::Tensor through_y = (y * gy.to(y.scalar_type())).sum();
  const at::Tensor loss = a.defined() ? (s * a.to(s.scalar_type())).sum() + through_y : through_y;
  std::vector<at::Tensor> wrt{xi, di, wi};
  if (bi.defined()) wrt.push_back(bi);
  const auto grads = torch::autograd::grad({loss}, wrt);
  std::vector<at::Tensor> out{s.detach(), y.detach()};
  out.insert(out.end(), grads.begin(), grads.end());
  return out;
}

// The largest error of each output against `reference` computed in double.
inline std::vector<double> add_norm_errors(const AddNorm& f, const AddNorm& reference, const at::Tensor& x,
                                           const at::Tensor& delta, const at::Tensor& w, const at::Tensor& bias,
                                           const at::Tensor& a, const at::Tensor& gy) {
  const auto got = add_norm_outputs(f, x, delta, w, bias, a, gy);
  const auto in_double = [](const at::Tensor& t) { return t.defined() ? t.to(at::kDouble) : t; };
  const auto want = add_norm_outputs(reference, in_double(x), in_double(delta), in_double(w), in_double(bias),
                                     in_double(a), in_double(gy));
  std::vector<double> out;
  for (size_t k = 0; k < got.size(); ++k) out.push_back(largest_error(got[k], want[k].to(got[k].device())));
  return out;
}

// add_rms_norm's five (s, y and the gradients of x, delta and w), as the tests above call them.
inline std::vector<at::Tensor> add_rms_norm_outputs(const AddRmsNorm& f, const at::Tensor& x, const at::Tensor& delta,
                                                    const at::Tensor& w, const at::Tensor& a, const at::Tensor& gy) {
  return add_norm_outputs(without_bias(f), x, delta, w, at::Tensor(), a, gy);
}
inline std::vector<double> add_rms_norm_errors(const AddRmsNorm& f, const at::Tensor& x, const at::Tensor& delta,
                                               const at::Tensor& w, const at::Tensor& a, const at::Tensor& gy) {
  return add_norm_errors(without_bias(f), without_bias(loom_ops::reference::add_rms_norm), x, delta, w, at::Tensor(),
                         a, gy);
}

}  // namespace loom_ops_test
