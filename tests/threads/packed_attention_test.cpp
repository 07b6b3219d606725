// The gpt plugin's CPU attention from the packed qkv (plugins/models/gpt/packed_attention.cpp)
// against the split-heads path of attention.hpp run by LibTorch in double precision: outputs and
// the gradient with respect to qkv, at a size whose heads are split across threads.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "attention.hpp"
#include "packed_attention.hpp"

namespace {

constexpr int64_t B = 2, T = 150, H = 4, D = 16, C = H * D, T_MAX = 160;  // T: two 64-row blocks and a partial one

// The textbook path: q, k, v as (B, H, T, D) views, LibTorch's bmm and softmax.
at::Tensor split_heads(const at::Tensor& qkv, const at::Tensor& mask) {
  const std::vector<at::Tensor> parts = qkv.split(C, -1);
  const auto heads = [](const at::Tensor& t) { return t.view({B, T, H, D}).transpose(1, 2); };
  const at::Tensor y = loom_gpt::causal_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), mask, 0.0, false);
  return y.transpose(1, 2).reshape({B, T, C});
}

}  // namespace

TEST_CASE("packed attention: the split-heads values and qkv gradient") {
  at::manual_seed(5);
  const at::Tensor mask = loom_gpt::causal_mask(T_MAX, at::kCPU);
  const at::Tensor qkv = at::randn({B, T, 3 * C});
  const at::Tensor w = at::randn({B, T, C});
  REQUIRE(loom_gpt::packed_attention_applies(qkv, mask, 0.0, true));
  CHECK_FALSE(loom_gpt::packed_attention_applies(qkv, mask, 0.1, true));     // dropout: the other path
  CHECK_FALSE(loom_gpt::packed_attention_applies(qkv.to(at::kDouble), mask, 0.0, true));

  const at::Tensor x = qkv.clone().requires_grad_(true);
  const at::Tensor y = loom_gpt::packed_causal_attention(x, H, mask);
  const at::Tensor grad = torch::autograd::grad({(y * w).sum()}, {x})[0];

  const at::Tensor x64 = qkv.to(at::kDouble).requires_grad_(true);
  const at::Tensor y64 = split_heads(x64, mask.to(at::kDouble));
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
