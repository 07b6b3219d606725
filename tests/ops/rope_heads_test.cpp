// rope_heads (ops/rope_heads/) on the CPU against its reference (rms_norm per head, transpose,
// Rope::apply) in double: values and the gradients of x and the norm weight, with and without
// the norm, with and without packed positions, over rows enough to be split across threads;
// what the fused path does not take goes to the reference; bad arguments refused by name. The
// loops run rope_heads_math.hpp's and cuda_common/rms_norm_math.hpp's formulas, the CUDA
// kernels' (ops_gpu_test.cpp holds those on a GPU).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/rope_heads.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

namespace {

using Op = at::Tensor (*)(const loom_ops::Rope&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double);

// The rope's table in `type` (the reference casts it to x's dtype anyway).
loom_ops::Rope table_as(const loom_ops::Rope& rope, at::ScalarType type) {
  loom_ops::Rope out;
  out.cos = rope.cos.to(type);
  out.sin = rope.sin.to(type);
  return out;
}

// y, then the gradients of sum(y * a) with respect to x and (with a norm) w.
std::vector<at::Tensor> value_and_grads(Op op, const loom_ops::Rope& rope, const at::Tensor& x,
                                        const at::Tensor& positions, const at::Tensor& w, const at::Tensor& a) {
  const at::Tensor input = x.detach().clone().requires_grad_(true);
  const at::Tensor weight = w.defined() ? w.detach().clone().requires_grad_(true) : at::Tensor();
  const at::Tensor y = op(rope, input, positions, weight, 1e-6);
  std::vector<at::Tensor> wrt{input};
  if (weight.defined()) wrt.push_back(weight);
  const auto grads = torch::autograd::grad({(y * a.to(y.scalar_type())).sum()}, wrt);
  std::vector<at::Tensor> out{y.detach()};
  out.insert(out.end(), grads.begin(), grads.end());
  return out;
}

}  // namespace

TEST_CASE("rope_heads: the reference's values and gradients in fp32, laid out as (B, H, T, D)") {
  at::manual_seed(11);
  loom_ops::RopeScaling yarn;  // cos and sin scaled, the table's halves not the identity
  yarn.type = loom_ops::RopeScaling::Type::yarn;
  yarn.factor = 4.0;
  yarn.original_max_positions = 32;
  yarn.attention_factor = 1.1;
  struct Shape { int64_t B, T, H, D; };
  for (const Shape sh : {Shape{2, 37, 3, 16}, Shape{3, 128, 8, 64}}) {
    const loom_ops::Rope rope(160, sh.D, 10000.0, at::kCPU, yarn);
    const at::Tensor x = at::randn({sh.B, sh.T, sh.H, sh.D}) * 3, w = at::rand({sh.D}) + 0.5;
    const at::Tensor a = at::randn({sh.B, sh.H, sh.T, sh.D});
    const at::Tensor packed = at::randint(0, 160, {sh.B, sh.T}, at::kLong);
    for (const bool norm : {false, true}) {
      for (const bool with_positions : {false, true}) {
        CAPTURE(sh.D);
        CAPTURE(norm);
        CAPTURE(with_positions);
        const at::Tensor positions = with_positions ? packed : at::Tensor(), weight = norm ? w : at::Tensor();
        const auto fused = value_and_grads(loom_ops::rope_heads, rope, x, positions, weight, a);
        const auto exact = value_and_grads(loom_ops::reference::rope_heads, table_as(rope, at::kDouble),
                                           x.to(at::kDouble), positions, norm ? w.to(at::kDouble) : at::Tensor(), a);
        CHECK(fused[0].is_contiguous());
        CHECK((fused[0].sizes() == at::IntArrayRef{sh.B, sh.H, sh.T, sh.D}));
        REQUIRE(fused.size() == exact.size());
        for (size_t k = 0; k < fused.size(); ++k) {
          CAPTURE(k);  // y, d x, d w
          CHECK(largest_error(fused[k], exact[k]) < 2e-6);
        }
      }
    }
  }
}

TEST_CASE("rope_heads: other tensors go to the reference; bad arguments refused by name") {
  at::manual_seed(12);
  const loom_ops::Rope rope(16, 8, 10000.0, at::kCPU);
  const at::Tensor x = at::randn({2, 5, 3, 8}), w = at::rand({8}) + 0.5;
  // bf16 x with an fp32 norm weight: the reference's fp32 result (x times w's dtype).
  const at::Tensor halves = x.to(at::kBFloat16);
  const at::Tensor mixed = loom_ops::rope_heads(rope, halves, at::Tensor(), w, 1e-6);
  CHECK((mixed.scalar_type() == at::kFloat));
  CHECK(at::equal(mixed, loom_ops::reference::rope_heads(rope, halves, at::Tensor(), w, 1e-6)));
  const at::Tensor strided = x.transpose(0, 1).contiguous().transpose(0, 1);  // not contiguous
  CHECK(largest_error(loom_ops::rope_heads(rope, strided, at::Tensor(), w, 1e-6),
                      loom_ops::reference::rope_heads(rope, strided, at::Tensor(), w, 1e-6)) < 1e-6);
  CHECK(loom_ops::rope_heads(rope, at::empty({0, 5, 3, 8}), at::Tensor(), w, 1e-6).numel() == 0);

  const auto refused = [&](const at::Tensor& input, const at::Tensor& positions, const at::Tensor& weight) {
    CHECK_THROWS_AS(loom_ops::rope_heads(rope, input, positions, weight, 1e-6), std::invalid_argument);
  };
  refused(at::randn({2, 5, 3, 6}), at::Tensor(), at::Tensor());                      // D not the table's
  refused(at::randn({2, 20, 3, 8}), at::Tensor(), at::Tensor());                     // more positions than rows
  refused(x, at::full({2, 5}, 16, at::kLong), at::Tensor());                         // a position past the table
  refused(x, at::full({2, 5}, -1, at::kLong), at::Tensor());                         // a negative position
  refused(x, at::zeros({2, 4}, at::kLong), at::Tensor());                            // positions not (B, T)
  refused(x, at::zeros({2, 5}, at::kInt), at::Tensor());                             // positions not int64
  refused(x, at::Tensor(), at::ones({6}));                                           // norm weight not (D)
  CHECK_THROWS_AS(loom_ops::rope_heads(loom_ops::Rope(), x, at::Tensor(), at::Tensor(), 1e-6), std::invalid_argument);
}
