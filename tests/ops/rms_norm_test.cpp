// rms_norm_test.cpp: the RMSNorm op (ops/rms_norm/) against LibTorch's own at::rms_norm in
// double (the fused CPU loops for fp32, over rows enough to split across threads), and in
// bfloat16 against Hugging Face's order of casts (normalise in fp32, round to the input's
// dtype, then scale); what the loops do not take goes to the reference; bad shapes refused.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/rms_norm.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <stdexcept>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

TEST_CASE("rms_norm: at::rms_norm's values and gradients") {
  at::manual_seed(4);
  const at::Tensor x = at::randn({3, 5, 64}, at::kDouble).requires_grad_(true);
  const at::Tensor w = (at::rand({64}, at::kDouble) + 0.5).requires_grad_(true);
  const at::Tensor up = at::randn({3, 5, 64}, at::kDouble);
  const at::Tensor ours = loom_ops::rms_norm(x.to(at::kFloat), w.to(at::kFloat), 1e-6);
  const at::Tensor theirs = at::rms_norm(x, {64}, w, 1e-6);
  CHECK(largest_error(ours, theirs) < 1e-6);
  const auto g_ours = torch::autograd::grad({(ours * up.to(at::kFloat)).sum()}, {x, w});
  const auto g_theirs = torch::autograd::grad({(theirs * up).sum()}, {x, w});
  CHECK(largest_error(g_ours[0], g_theirs[0]) < 1e-5);
  CHECK(largest_error(g_ours[1], g_theirs[1]) < 1e-5);
}

TEST_CASE("rms_norm: bfloat16 input rounds after normalising and before scaling, as transformers does") {
  at::manual_seed(5);
  const at::Tensor x = at::randn({4, 32}).to(at::kBFloat16);
  const at::Tensor w = at::rand({32}) + 0.5;  // fp32 weight: the product promotes to fp32
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor want = (x32 / (x32.pow(2).mean(-1, true) + 1e-5).sqrt()).to(at::kBFloat16).to(at::kFloat) * w;
  const at::Tensor got = loom_ops::rms_norm(x, w, 1e-5);
  CHECK((got.scalar_type() == at::kFloat));
  CHECK(largest_error(got, want) < 1e-2);  // one bf16 rounding apart at most (rsqrt against 1/sqrt)
}

TEST_CASE("rms_norm: the fused loops over many rows; strided and bfloat16 inputs take the reference's path") {
  at::manual_seed(6);
  const at::Tensor x = at::randn({64, 37, 96}, at::kDouble) * 3, w = at::rand({96}, at::kDouble) + 0.5;
  const at::Tensor up = at::randn({64, 37, 96}, at::kDouble);
  const auto value_and_grads = [&](auto op, const at::Tensor& input, const at::Tensor& weight) {
    const at::Tensor xi = input.detach().clone().requires_grad_(true), wi = weight.detach().clone().requires_grad_(true);
    const at::Tensor y = op(xi, wi, 1e-6);
    auto out = torch::autograd::grad({(y * up.to(y.scalar_type())).sum()}, {xi, wi});
    out.insert(out.begin(), y.detach());
    return out;
  };
  const auto fused = value_and_grads(loom_ops::rms_norm, x.to(at::kFloat), w.to(at::kFloat));
  const auto exact = value_and_grads(loom_ops::reference::rms_norm, x, w);
  for (size_t k = 0; k < fused.size(); ++k) {
    CAPTURE(k);  // y, d x, d w
    CHECK(largest_error(fused[k], exact[k]) < 2e-6);
  }
  const at::Tensor strided = x.to(at::kFloat).transpose(0, 1), halves = x.to(at::kBFloat16), w32 = w.to(at::kFloat);
  CHECK(at::equal(loom_ops::rms_norm(strided, w32, 1e-6), loom_ops::reference::rms_norm(strided, w32, 1e-6)));
  CHECK(at::equal(loom_ops::rms_norm(halves, w32, 1e-6), loom_ops::reference::rms_norm(halves, w32, 1e-6)));
}

TEST_CASE("rms_norm refuses a weight that does not match the last dimension") {
  CHECK_THROWS_AS(loom_ops::rms_norm(at::randn({2, 8}), at::ones({7}), 1e-5), std::invalid_argument);
}
