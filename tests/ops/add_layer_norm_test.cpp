// add_layer_norm_test.cpp: the fused residual add + LayerNorm's CPU loops (ops/add_layer_norm/)
// against the reference (x + delta, then at::layer_norm) in double: values and the gradients of
// x, delta, w and b through both outputs or y alone, with and without a bias, over rows of many
// widths; the entry point is the reference; what the loops cannot take refused; bad shapes refused
// by name. The loops run cuda_common/layer_norm_math.hpp's formulas, the ones the CUDA kernels
// run (ops_gpu_test.cpp holds those on a GPU).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/add_layer_norm.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <stdexcept>
#include <string>

#include "add_norm_check.hpp"

using loom_ops_test::add_norm_errors;
using loom_ops_test::add_norm_outputs;

TEST_CASE("fused_cpu::add_layer_norm: the reference's values and gradients in fp32, through s and y or y alone") {
  at::manual_seed(16);
  // Not rows of 2: there xhat = +-1 whatever s is, and the gradient through y alone is eps-sized
  // cancellation fp32 cannot resolve (LibTorch's own fp32 autograd neither).
  for (const int64_t d : {3, 7, 64, 257, 4096}) {
    CAPTURE(d);
    // An offset residual stream: the mean is not small beside the spread, as in a trained model.
    const at::Tensor x = at::randn({3, 5, d}) * 2 + 3, delta = at::randn({3, 5, d});
    const at::Tensor w = at::rand({d}) + 0.5, bias = at::randn({d});
    const at::Tensor a = at::randn({3, 5, d}), gy = at::randn({3, 5, d});
    for (const bool with_bias : {true, false}) {
      for (const bool through_s : {true, false}) {
        CAPTURE(with_bias);
        CAPTURE(through_s);
        const std::vector<double> errors =
            add_norm_errors(loom_ops::fused_cpu::add_layer_norm, loom_ops::reference::add_layer_norm, x, delta, w,
                            with_bias ? bias : at::Tensor(), through_s ? a : at::Tensor(), gy);
        CHECK(errors.size() == (with_bias ? 6u : 5u));
        for (size_t k = 0; k < errors.size(); ++k) {
          CAPTURE(k);  // s, y, then the gradients of x, delta, w, b
          CHECK(errors[k] < 2e-5);
        }
      }
    }
  }
}

TEST_CASE("add_layer_norm: the entry point is the reference; the fused loops refuse what they cannot take") {
  at::manual_seed(17);
  const at::Tensor x = at::randn({16, 8}).t(), delta = at::randn({8, 16}), w = at::rand({16}) + 0.5;
  const at::Tensor bias = at::randn({16}), gy = at::randn({8, 16});
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16, at::kDouble}) {
    const std::string type_name = c10::toString(type);
    CAPTURE(type_name);
    const auto got = add_norm_outputs(loom_ops::add_layer_norm, x.to(type), delta.to(type), w.to(type), bias.to(type),
                                      {}, gy);
    const auto want = add_norm_outputs(loom_ops::reference::add_layer_norm, x.to(type), delta.to(type), w.to(type),
                                       bias.to(type), {}, gy);
    for (size_t k = 0; k < got.size(); ++k) CHECK(at::equal(got[k], want[k]));
    CHECK_THROWS_AS(loom_ops::fused_cpu::add_layer_norm(x.to(type), delta.to(type), w.to(type), bias.to(type), 1e-5),
                    std::invalid_argument);  // strided (and not float32)
  }
}

TEST_CASE("add_layer_norm: no rows give empty outputs and zero gradients of w and b") {
  const at::Tensor w = (at::rand({16}) + 0.5).requires_grad_(true), bias = at::zeros({16}).requires_grad_(true);
  const auto [s, y] = loom_ops::fused_cpu::add_layer_norm(at::zeros({0, 16}), at::zeros({0, 16}), w, bias, 1e-5);
  CHECK(y.numel() == 0);
  const auto grads = torch::autograd::grad({y.sum()}, {w, bias});
  CHECK(grads[0].abs().sum().item<double>() == 0.0);
  CHECK(grads[1].abs().sum().item<double>() == 0.0);
}

TEST_CASE("add_layer_norm refuses mismatched shapes by name") {
  CHECK_THROWS_WITH_AS(loom_ops::add_layer_norm(at::randn({2, 8}), at::randn({2, 7}), at::ones({8}), {}, 1e-5),
                       doctest::Contains("add_layer_norm"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(loom_ops::add_layer_norm(at::randn({2, 8}), at::randn({2, 8}), at::ones({8}), at::ones({7}), 1e-5),
                       doctest::Contains("w and b must be (D)"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(loom_ops::add_layer_norm(at::randn({2, 0}), at::randn({2, 0}), at::ones({0}), {}, 1e-5),
                       doctest::Contains("rows of 1 element or more"), std::invalid_argument);
}
