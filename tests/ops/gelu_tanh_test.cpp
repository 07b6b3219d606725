// The CPU GELU (ops/gelu_tanh/) against its reference, LibTorch's at::gelu(x, "tanh"), and its
// autograd: values and gradients, over a tensor long enough to be
// split across threads and over the extremes (exp overflowing, infinities).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/gelu_tanh.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <limits>


namespace {

// (value, gradient of sum(y * w)) for f at x.
std::pair<at::Tensor, at::Tensor> value_and_grad(at::Tensor (*f)(const at::Tensor&), const at::Tensor& x,
                                                 const at::Tensor& w) {
  const at::Tensor input = x.detach().clone().requires_grad_(true);
  const at::Tensor y = f(input);
  const at::Tensor grad = torch::autograd::grad({(y * w).sum()}, {input})[0];
  return {y.detach(), grad};
}

}  // namespace

TEST_CASE("gelu_tanh: LibTorch's values and gradients, as close to the exact ones as LibTorch's float path") {
  at::manual_seed(3);
  const at::Tensor x = at::cat({at::randn({1'000'003}) * 3, at::linspace(-30, 30, 4001),
                                at::tensor({0.0f, -0.0f, 1e-30f, -1e-30f, 80.0f, -80.0f, 1e4f, -1e4f})});
  const at::Tensor w = at::randn_like(x);
  const auto [y, grad] = value_and_grad(loom_ops::gelu_tanh, x, w);
  const auto [y_float, grad_float] = value_and_grad(loom_ops::reference::gelu_tanh, x, w);
  // The reference: LibTorch's GELU in double precision, rounded to float.
  const auto [y_double, grad_double] = value_and_grad(loom_ops::reference::gelu_tanh, x.to(at::kDouble), w.to(at::kDouble));
  const at::Tensor y_ref = y_double.to(at::kFloat), grad_ref = grad_double.to(at::kFloat);
  // Absolute error scaled by max(1, |reference|).
  const auto error = [](const at::Tensor& got, const at::Tensor& want) {
    return ((got - want).abs() / want.abs().clamp_min(1.0)).max().item<double>();
  };
  MESSAGE("largest error against double: gelu_tanh value " << error(y, y_ref) << ", gradient " << error(grad, grad_ref)
                                                           << "; at::gelu in float: value " << error(y_float, y_ref)
                                                           << ", gradient " << error(grad_float, grad_ref));
  CHECK(error(y, y_ref) < 1e-6);
  CHECK(error(grad, grad_ref) < 4e-6);
  CHECK(error(y, y_float) < 1e-6);
}

TEST_CASE("gelu_tanh: infinities as LibTorch, and other tensors go to at::gelu") {
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor y = loom_ops::gelu_tanh(at::tensor({inf, -inf}));
  CHECK(y[0].item<float>() == inf);
  CHECK(std::isnan(y[1].item<float>()) == std::isnan(at::gelu(at::tensor({-inf}), "tanh")[0].item<float>()));
  const at::Tensor strided = at::randn({64, 64}).t();  // not contiguous: LibTorch's path
  CHECK(at::allclose(loom_ops::gelu_tanh(strided), at::gelu(strided, "tanh")));
  const at::Tensor doubles = at::randn({100}, at::kDouble);
  CHECK(at::equal(loom_ops::gelu_tanh(doubles), at::gelu(doubles, "tanh")));
}
