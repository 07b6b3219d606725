// The CPU attention from the packed qkv (ops/packed_attention/packed_attention.cpp) against its
// reference, the split-heads path run by LibTorch in double precision: outputs and the gradient
// with respect to qkv, at a size whose heads are split across threads.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/packed_attention.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

namespace {

constexpr int64_t B = 2, T = 150, H = 4, D = 16, C = H * D, T_MAX = 160;  // T: two 64-row blocks and a partial one

// The additive causal bias the models pass: 0 on and below the diagonal, -inf above.
at::Tensor causal_mask(int64_t size) {
  return at::zeros({size, size}).masked_fill(at::ones({size, size}, at::kBool).triu(1), -INFINITY);
}

}  // namespace

TEST_CASE("packed attention: the split-heads values and qkv gradient") {
  at::manual_seed(5);
  const at::Tensor mask = causal_mask(T_MAX);
  const at::Tensor qkv = at::randn({B, T, 3 * C});
  const at::Tensor w = at::randn({B, T, C});
  REQUIRE(loom_ops::packed_attention_applies(qkv, mask, 0.0, true));
  CHECK_FALSE(loom_ops::packed_attention_applies(qkv, mask, 0.1, true));     // dropout: the other path
  CHECK_FALSE(loom_ops::packed_attention_applies(qkv.to(at::kDouble), mask, 0.0, true));

  const at::Tensor x = qkv.clone().requires_grad_(true);
  const at::Tensor y = loom_ops::packed_causal_attention(x, H, mask);
  const at::Tensor grad = torch::autograd::grad({(y * w).sum()}, {x})[0];

  const at::Tensor x64 = qkv.to(at::kDouble).requires_grad_(true);
  const at::Tensor y64 = loom_ops::reference::packed_causal_attention(x64, H, mask.to(at::kDouble));
  const at::Tensor grad64 = torch::autograd::grad({(y64 * w.to(at::kDouble)).sum()}, {x64})[0];

  const auto error = [](const at::Tensor& got, const at::Tensor& want) {
    return ((got.to(at::kDouble) - want).abs().max() / want.abs().max()).item<double>();
  };
  MESSAGE("largest error against double, relative to the largest value: output " << error(y, y64) << ", gradient "
                                                                                  << error(grad, grad64));
  CHECK(error(y, y64) < 1e-6);
  CHECK(error(grad, grad64) < 1e-5);
  // The causal mask: the first position sees only itself, so its output is its own v.
  CHECK(at::allclose(y.detach().select(1, 0), qkv.select(1, 0).narrow(-1, 2 * C, C), 1e-6, 1e-6));
}
