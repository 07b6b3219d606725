// The CPU SwiGLU (ops/swiglu/) against its reference, at::silu(gate) * up, in double: values and
// both gradients over a tensor long enough to be split across threads and over the extremes
// (exp overflowing, infinities); what goes to the reference and what is refused.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/swiglu.hpp>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

namespace {

// y and the gradients of sum(y * w) with respect to gate and up.
std::vector<at::Tensor> value_and_grads(at::Tensor (*f)(const at::Tensor&, const at::Tensor&), const at::Tensor& gate,
                                        const at::Tensor& up, const at::Tensor& w) {
  const at::Tensor g = gate.detach().clone().requires_grad_(true), u = up.detach().clone().requires_grad_(true);
  const at::Tensor y = f(g, u);
  const auto grads = torch::autograd::grad({(y * w).sum()}, {g, u});
  return {y.detach(), grads[0], grads[1]};
}

}  // namespace

TEST_CASE("swiglu: the reference's values and gradients, as close to double as at::silu's float path") {
  at::manual_seed(5);
  const at::Tensor gate = at::cat({at::randn({1'000'003}) * 3, at::linspace(-120, 120, 4001),
                                   at::tensor({0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 1e4f, -1e4f})});
  const at::Tensor up = at::randn_like(gate), w = at::randn_like(gate);
  const std::vector<at::Tensor> fused = value_and_grads(loom_ops::swiglu, gate, up, w);
  const std::vector<at::Tensor> composed = value_and_grads(loom_ops::reference::swiglu, gate, up, w);
  const std::vector<at::Tensor> exact =
      value_and_grads(loom_ops::reference::swiglu, gate.to(at::kDouble), up.to(at::kDouble), w.to(at::kDouble));
  const char* names[] = {"y", "d gate", "d up"};
  for (size_t k = 0; k < exact.size(); ++k) {
    const double ours = largest_error(fused[k], exact[k]), theirs = largest_error(composed[k], exact[k]);
    MESSAGE(std::string(names[k]) << ": largest error against double " << ours << " (the composition in float: " << theirs << ")");
    CHECK((fused[k].scalar_type() == at::kFloat));
    CHECK(ours < 1e-6);
  }
}

TEST_CASE("swiglu: infinities as the composition; other tensors go to it; mismatched arguments refused") {
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor gate = at::tensor({inf, -inf, 1.0f, -100.0f}), up = at::tensor({2.0f, 2.0f, inf, 3.0f});
  const at::Tensor ours = loom_ops::swiglu(gate, up), theirs = loom_ops::reference::swiglu(gate, up);
  for (int64_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    const float a = ours[i].item<float>(), b = theirs[i].item<float>();
    CHECK((std::isnan(a) == std::isnan(b)));
    if (!std::isnan(b)) CHECK(a == b);
  }
  const at::Tensor strided = at::randn({64, 64}).t(), other = at::randn({64, 64});
  CHECK(at::equal(loom_ops::swiglu(strided, other), loom_ops::reference::swiglu(strided, other)));
  const at::Tensor doubles = at::randn({100}, at::kDouble), halves = at::randn({100}).to(at::kBFloat16);
  CHECK(at::equal(loom_ops::swiglu(doubles, doubles), loom_ops::reference::swiglu(doubles, doubles)));
  CHECK(at::equal(loom_ops::swiglu(halves, halves), loom_ops::reference::swiglu(halves, halves)));
  CHECK(loom_ops::swiglu(at::empty({0, 8}), at::empty({0, 8})).numel() == 0);
  // No broadcasting: a gate and an up of different shapes are a caller's bug.
  CHECK_THROWS_AS(loom_ops::swiglu(at::randn({4, 8}), at::randn({8})), std::invalid_argument);
  CHECK_THROWS_AS(loom_ops::swiglu(at::randn({8}), at::randn({8}, at::kDouble)), std::invalid_argument);
  CHECK_THROWS_AS(loom_ops::reference::swiglu(at::randn({4, 8}), at::randn({8})), std::invalid_argument);
}

TEST_CASE("swiglu: backward keeps gate and up only, not silu(gate)") {
  // The fused op's graph node holds two saved tensors; the composition's nodes hold three.
  const at::Tensor gate = at::randn({16, 32}).requires_grad_(true), up = at::randn({16, 32}).requires_grad_(true);
  const at::Tensor y = loom_ops::swiglu(gate, up);
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name().find("SwigluCpu") != std::string::npos);
  const at::Tensor composed = loom_ops::reference::swiglu(gate, up);
  CHECK(composed.grad_fn()->name() == "MulBackward0");
}
