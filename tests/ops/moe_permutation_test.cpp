// moe_permute and moe_combine (ops/moe_permutation/) against their references, the composition
// the MoE layer used before (index_select; a product, zeros and index_add): in fp32 the values
// and the row gradients bit for bit, the weights' gradient as close to double as the
// composition's; other dtypes and larger top-k go to the reference; a broken order is refused.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/moe_permutation.hpp>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

namespace {

// A router's choice for N tokens among E experts, k each, and the pairs' order sorted by expert.
at::Tensor sorted_pairs(int64_t N, int64_t E, int64_t k) {
  const at::Tensor chosen = std::get<1>(at::rand({N, E}).topk(k, -1));  // (N, k), distinct per token
  return std::get<1>(chosen.reshape({-1}).sort(std::optional<bool>(true), 0, false));
}

using Combine = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&);
using Permute = at::Tensor (*)(const at::Tensor&, const at::Tensor&, int64_t);

// The permuted rows, combined: values and the gradients of sum(y * w) for x and top.
std::vector<at::Tensor> round_trip(Permute permute, Combine combine, const at::Tensor& x, const at::Tensor& order,
                                   const at::Tensor& top, const at::Tensor& scale, const at::Tensor& w) {
  const at::Tensor xs = x.detach().clone().requires_grad_(true), ts = top.detach().clone().requires_grad_(true);
  const int64_t k = top.size(1);
  const at::Tensor rows = permute(xs, order, k);
  const at::Tensor computed = rows * scale;  // stands in for the experts
  const at::Tensor y = combine(computed, order, ts);
  const auto grads = torch::autograd::grad({(y * w).sum()}, {xs, ts});
  return {rows.detach(), y.detach(), grads[0], grads[1]};
}

}  // namespace

TEST_CASE("moe_permute and moe_combine: the composition's values and row gradients bit for bit in fp32") {
  at::manual_seed(11);
  for (const auto& [N, E, k, C] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {1500, 16, 4, 96}, {7, 8, 2, 5}, {64, 4, 1, 33}, {300, 64, 8, 128}}) {
    CAPTURE(N);
    CAPTURE(k);
    const at::Tensor order = sorted_pairs(N, E, k);
    const at::Tensor x = at::randn({N, C}), top = at::rand({N, k}), scale = at::randn({N * k, C});
    const at::Tensor w = at::randn({N, C});
    const auto fused = round_trip(loom_ops::moe_permute, loom_ops::moe_combine, x, order, top, scale, w);
    const auto composed =
        round_trip(loom_ops::reference::moe_permute, loom_ops::reference::moe_combine, x, order, top, scale, w);
    const auto exact = round_trip(loom_ops::reference::moe_permute, loom_ops::reference::moe_combine,
                                  x.to(at::kDouble), order, top.to(at::kDouble), scale.to(at::kDouble),
                                  w.to(at::kDouble));
    CHECK(at::equal(fused[0], composed[0]));  // the rows
    CHECK(at::equal(fused[1], composed[1]));  // each token's weighted sum
    CHECK(at::equal(fused[2], composed[2]));  // d x: each token's row gradients summed
    const double ours = largest_error(fused[3], exact[3]), theirs = largest_error(composed[3], exact[3]);
    MESSAGE("d top: largest error against double " << ours << " (the composition in float: " << theirs << ")");
    CHECK(ours < 1e-5);
  }
}

TEST_CASE("moe_permute and moe_combine: other dtypes and top-k above 32 take the reference") {
  at::manual_seed(12);
  const at::Tensor order = sorted_pairs(20, 8, 3);
  const at::Tensor x = at::randn({20, 6}, at::kDouble), top = at::rand({20, 3}, at::kDouble);
  CHECK(at::equal(loom_ops::moe_permute(x, order, 3), loom_ops::reference::moe_permute(x, order, 3)));
  const at::Tensor rows = at::randn({60, 6}, at::kDouble);
  CHECK(at::equal(loom_ops::moe_combine(rows, order, top), loom_ops::reference::moe_combine(rows, order, top)));
  const at::Tensor wide_order = sorted_pairs(3, 40, 40);
  const at::Tensor wide_rows = at::randn({120, 4}), wide_top = at::rand({3, 40});
  CHECK(at::allclose(loom_ops::moe_combine(wide_rows, wide_order, wide_top),
                     loom_ops::reference::moe_combine(wide_rows, wide_order, wide_top)));
}

TEST_CASE("moe_permute and moe_combine refuse an order that is not a permutation, and shapes that do not fit") {
  const at::Tensor x = at::randn({4, 3}), rows = at::randn({8, 3}), top = at::rand({4, 2});
  const auto refused = [](const std::function<void()>& call, const std::string& says) {
    try {
      call();
      FAIL("not refused: " << says);
    } catch (const std::invalid_argument& e) {
      CHECK_MESSAGE(std::string(e.what()).find(says) != std::string::npos, std::string(e.what()));
    }
  };
  const at::Tensor repeated = at::tensor({0, 1, 2, 3, 4, 5, 6, 6}, at::kLong);
  const at::Tensor outside = at::tensor({0, 1, 2, 3, 4, 5, 6, 8}, at::kLong);
  refused([&] { loom_ops::moe_permute(x, repeated, 2); }, "an earlier position holds too");
  refused([&] { loom_ops::moe_combine(rows, outside, top); }, "order must be a permutation of 0 .. 7");
  refused([&] { loom_ops::moe_permute(x, at::arange(6, at::kLong), 2); }, "order must be (8) int64");
  refused([&] { loom_ops::moe_permute(x, at::arange(8, at::kInt), 2); }, "order must be (8) int64");
  refused([&] { loom_ops::moe_combine(rows, at::arange(8, at::kLong), at::rand({4, 3})); }, "top must be (N, k)");
  refused([&] { loom_ops::moe_combine(rows, at::arange(8, at::kLong), top.to(at::kDouble)); }, "top must be (N, k)");
  refused([&] { loom_ops::moe_permute(x, at::arange(8, at::kLong), 0); }, "k at least 1");
}
