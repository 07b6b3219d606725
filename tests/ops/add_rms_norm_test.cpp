// add_rms_norm_test.cpp: the fused residual add + RMSNorm (ops/add_rms_norm/) on the CPU against
// the reference (x + delta, then rms_norm) in double: values and the gradients of x, delta and w
// through both outputs, over rows of many widths; what the fused path does not take goes to the
// reference unchanged; bad shapes refused by name. The loops run cuda_common/rms_norm_math.hpp's
// formulas, the ones the CUDA kernels run (ops_gpu_test.cpp holds those on a GPU).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/add_rms_norm.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <stdexcept>
#include <string>

#include "add_norm_check.hpp"

using loom_ops_test::add_rms_norm_errors;
using loom_ops_test::add_rms_norm_outputs;

TEST_CASE("add_rms_norm: the reference's values and gradients in fp32, through s and y or y alone") {
  at::manual_seed(6);
  // Not rows of one: there y = w s / sqrt(s^2 + eps), whose gradient eps / (s^2 + eps)^1.5 is a
  // cancellation fp32 cannot resolve (LibTorch's own fp32 autograd neither).
  for (const int64_t d : {3, 7, 64, 257, 4096}) {
    CAPTURE(d);
    const at::Tensor x = at::randn({3, 5, d}) * 2, delta = at::randn({3, 5, d}), w = at::rand({d}) + 0.5;
    const at::Tensor a = at::randn({3, 5, d}), b = at::randn({3, 5, d});
    for (const bool through_s : {true, false}) {
      CAPTURE(through_s);
      const std::vector<double> errors =
          add_rms_norm_errors(loom_ops::add_rms_norm, x, delta, w, through_s ? a : at::Tensor(), b);
      for (const double e : errors) CHECK(e < 2e-5);
    }
  }
}

TEST_CASE("add_rms_norm: strided, bfloat16 and double inputs take the reference's own path") {
  at::manual_seed(7);
  const at::Tensor x = at::randn({16, 8}).t(), delta = at::randn({8, 16}), w = at::rand({16}) + 0.5;
  const at::Tensor b = at::randn({8, 16});
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16, at::kDouble}) {
    const std::string type_name = c10::toString(type);
    CAPTURE(type_name);
    const auto got = add_rms_norm_outputs(loom_ops::add_rms_norm, x.to(type), delta.to(type), w.to(type), {}, b);
    const auto want = add_rms_norm_outputs(loom_ops::reference::add_rms_norm, x.to(type), delta.to(type), w.to(type), {}, b);
    for (size_t k = 0; k < got.size(); ++k) CHECK(at::equal(got[k], want[k]));
  }
}

TEST_CASE("add_rms_norm: no rows give empty outputs and a zero gradient of w") {
  const at::Tensor w = (at::rand({16}) + 0.5).requires_grad_(true);
  const auto [s, y] = loom_ops::add_rms_norm(at::zeros({0, 16}), at::zeros({0, 16}), w, 1e-6);
  CHECK(y.numel() == 0);
  CHECK(torch::autograd::grad({y.sum()}, {w})[0].abs().sum().item<double>() == 0.0);
}

TEST_CASE("add_rms_norm refuses mismatched shapes by name") {
  CHECK_THROWS_WITH_AS(loom_ops::add_rms_norm(at::randn({2, 8}), at::randn({2, 7}), at::ones({8}), 1e-5),
                       doctest::Contains("add_rms_norm"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(loom_ops::add_rms_norm(at::randn({2, 8}), at::randn({2, 8}), at::ones({7}), 1e-5),
                       doctest::Contains("w must be (D)"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(loom_ops::add_rms_norm(at::randn({2, 0}), at::randn({2, 0}), at::ones({0}), 1e-5),
                       doctest::Contains("rows of 1 element or more"), std::invalid_argument);
}
