// block_attention_test.cpp: attention computed block of keys by block and merged through each
// row's log-sum-exp (ops/block_attention/, ring attention's arithmetic) against softmax over
// every key at once, in double: outputs and the gradients of q, k and v, for causal rows,
// grouped-query heads, keys visited in any order, the load-balanced split context parallelism
// uses (a rank holds chunks r and 2C-1-r), and rows that see no key of a block or of any.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/block_attention.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

namespace {

constexpr int64_t B = 2, H = 4, K = 2, L = 16, D = 8;
const double kScale = 1.0 / std::sqrt(double(D));

// The additive causal bias of queries at positions `rows` against keys at positions `cols`.
at::Tensor causal(const at::Tensor& rows, const at::Tensor& cols) {
  return at::zeros({rows.size(0), cols.size(0)}, at::kDouble)
      .masked_fill(cols.unsqueeze(0) > rows.unsqueeze(1), -INFINITY);
}

struct Inputs {
  at::Tensor q, k, v;
};

Inputs inputs() {
  at::manual_seed(12);
  return {at::randn({B, H, L, D}, at::kDouble).requires_grad_(true),
          at::randn({B, K, L, D}, at::kDouble).requires_grad_(true),
          at::randn({B, K, L, D}, at::kDouble).requires_grad_(true)};
}

// Queries at positions `rows` against the keys split into `blocks` (lists of positions, in the
// order visited), merged; the rows' part of the whole-row reference; and both sets of gradients.
void check_split(const std::vector<int64_t>& row_list, const std::vector<std::vector<int64_t>>& blocks) {
  const Inputs in = inputs();
  const at::Tensor rows = at::tensor(row_list, at::kLong);
  const at::Tensor q = in.q.index_select(2, rows);
  loom_ops::BlockAttention merged;
  for (const std::vector<int64_t>& block : blocks) {
    const at::Tensor cols = at::tensor(block, at::kLong);
    const loom_ops::BlockAttention part = loom_ops::attend_block(q, in.k.index_select(2, cols),
                                                                 in.v.index_select(2, cols), causal(rows, cols), kScale);
    merged = merged.out.defined() ? loom_ops::merge_blocks(merged, part) : part;
  }
  const at::Tensor all = at::arange(L, at::kLong);
  const at::Tensor want =
      loom_ops::reference::attention(in.q, in.k, in.v, causal(all, all), kScale).index_select(2, rows);
  CHECK(largest_error(merged.out, want) < 1e-12);
  const at::Tensor up = at::randn_like(want);
  const auto got_grads = torch::autograd::grad({(merged.out * up).sum()}, {in.q, in.k, in.v});
  const auto want_grads = torch::autograd::grad({(want * up).sum()}, {in.q, in.k, in.v});
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(at::isfinite(got_grads[i]).all().item<bool>());
    CHECK(largest_error(got_grads[i], want_grads[i]) < 1e-11);
  }
}

}  // namespace

TEST_CASE("block attention: causal rows over key blocks, merged, equal softmax over every key") {
  std::vector<int64_t> every(L);
  for (int64_t i = 0; i < L; ++i) every[size_t(i)] = i;
  check_split(every, {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});  // a ring of 4
  check_split(every, {{12, 13, 14, 15}, {0, 1, 2, 3}, {8, 9, 10, 11}, {4, 5, 6, 7}});  // any order
  check_split(every, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}});         // one block
}

TEST_CASE("block attention: the load-balanced split of context parallelism, C = 2, every rank") {
  // 2C = 4 chunks of 4 positions; rank r holds chunks r and 3 - r, and visits every rank's pair.
  const std::vector<std::vector<int64_t>> held = {{0, 1, 2, 3, 12, 13, 14, 15}, {4, 5, 6, 7, 8, 9, 10, 11}};
  check_split(held[0], {held[0], held[1]});
  check_split(held[1], {held[1], held[0]});
}

TEST_CASE("block attention: a block a row cannot see adds nothing; a row that sees nothing is zero") {
  const Inputs in = inputs();
  const at::Tensor rows = at::arange(4, at::kLong), cols = at::arange(8, 12, at::kLong);
  const at::Tensor q = in.q.index_select(2, rows);
  const loom_ops::BlockAttention unseen = loom_ops::attend_block(
      q, in.k.index_select(2, cols), in.v.index_select(2, cols), causal(rows, cols), kScale);
  CHECK(at::isinf(unseen.lse).all().item<bool>());
  CHECK(unseen.out.abs().max().item<double>() == 0.0);
  const loom_ops::BlockAttention both = loom_ops::merge_blocks(unseen, unseen);
  CHECK(both.out.abs().max().item<double>() == 0.0);
  const auto grads = torch::autograd::grad({both.out.sum()}, {in.q, in.k, in.v}, {}, std::nullopt, false, true);
  for (const at::Tensor& g : grads)
    if (g.defined()) CHECK(g.abs().max().item<double>() == 0.0);  // finite, and nothing to learn
}

TEST_CASE("block attention: float32 inputs within float rounding of the double reference; bad shapes refused") {
  const Inputs in = inputs();
  const at::Tensor all = at::arange(L, at::kLong), first = at::arange(8, at::kLong), last = at::arange(8, L, at::kLong);
  const auto f32 = [](const at::Tensor& t) { return t.detach().to(at::kFloat); };
  const auto part = [&](const at::Tensor& cols) {
    return loom_ops::attend_block(f32(in.q), f32(in.k).index_select(2, cols), f32(in.v).index_select(2, cols),
                                  causal(all, cols), kScale);
  };
  const loom_ops::BlockAttention merged = loom_ops::merge_blocks(part(first), part(last));
  CHECK((merged.out.scalar_type() == at::kFloat));
  CHECK(largest_error(merged.out, loom_ops::reference::attention(in.q, in.k, in.v, causal(all, all), kScale)) < 1e-6);
  CHECK_THROWS_AS(loom_ops::attend_block(f32(in.q), f32(in.k).narrow(1, 0, 1).repeat({1, 3, 1, 1}), f32(in.v), {}, 1.0),
                  std::invalid_argument);
}

namespace {

// The merged attention of q's rows over the keys cut into `blocks` (position lists) with the
// pair's forward, then each block's gradients from the merged result; against autograd through
// softmax over every key at once. dtype: the inputs'; tolerance: relative to the largest value.
void check_pair(at::ScalarType dtype, const std::vector<std::vector<int64_t>>& blocks, double tolerance,
                bool use_reference_backward) {
  const Inputs in = inputs();
  const at::Tensor all = at::arange(L, at::kLong);
  const auto cast = [&](const at::Tensor& t) { return t.detach().to(dtype); };
  const at::Tensor q = cast(in.q), k = cast(in.k), v = cast(in.v);
  loom_ops::BlockAttention merged;
  std::vector<loom_ops::BlockMask> masks;
  for (const std::vector<int64_t>& block : blocks) {
    const at::Tensor cols = at::tensor(block, at::kLong);
    // A block at the queries' own positions takes the kernels' causal flag; any other, a bias.
    const bool own = block.size() == size_t(L) && block.front() == 0;
    masks.push_back(own ? loom_ops::BlockMask{true, {}} : loom_ops::BlockMask{false, causal(all, cols)});
    const loom_ops::BlockAttention part =
        loom_ops::attend_block_forward(q, k.index_select(2, cols), v.index_select(2, cols), masks.back(), kScale);
    merged = merged.out.defined() ? loom_ops::merge_blocks(merged, part) : part;
  }
  const at::Tensor want = loom_ops::reference::attention(in.q, in.k, in.v, causal(all, all), kScale);
  CHECK(largest_error(merged.out, want) < tolerance);
  const at::Tensor up = at::randn_like(want);
  const auto want_grads = torch::autograd::grad({(want * up).sum()}, {in.q, in.k, in.v});
  at::Tensor dq = at::zeros_like(want), dk = at::zeros_like(in.k), dv = at::zeros_like(in.v);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const at::Tensor cols = at::tensor(blocks[b], at::kLong);
    const auto backward = use_reference_backward ? loom_ops::reference::attend_block_backward
                                                 : loom_ops::attend_block_backward;
    const loom_ops::BlockGradients g = backward(cast(up), q, k.index_select(2, cols), v.index_select(2, cols),
                                                masks[b], kScale, merged);
    dq += g.q.to(at::kDouble);
    dk.index_add_(2, cols, g.k.to(at::kDouble));
    dv.index_add_(2, cols, g.v.to(at::kDouble));
  }
  CHECK(largest_error(dq, want_grads[0]) < tolerance);
  CHECK(largest_error(dk, want_grads[1]) < tolerance);
  CHECK(largest_error(dv, want_grads[2]) < tolerance);
}

}  // namespace

TEST_CASE("block attention without autograd: the fused CPU pair and the arithmetic give softmax's values and gradients") {
  const std::vector<std::vector<int64_t>> ring = {{8, 9, 10, 11, 12, 13, 14, 15}, {0, 1, 2, 3, 4, 5, 6, 7}};
  std::vector<int64_t> every(L);
  for (int64_t i = 0; i < L; ++i) every[size_t(i)] = i;
  for (const bool reference : {false, true}) {
    CAPTURE(reference);
    check_pair(at::kDouble, ring, 1e-12, reference);
    check_pair(at::kDouble, {every}, 1e-12, reference);  // one causal block
    check_pair(at::kFloat, ring, 1e-5, reference);
  }
  check_pair(at::kBFloat16, ring, 3e-2, false);  // LibTorch's bf16 kernel: 8 bits of mantissa
}

TEST_CASE("block attention without autograd: a row a bias hides from every key is lse -inf, out 0, no gradient") {
  const Inputs in = inputs();
  const auto f32 = [](const at::Tensor& t) { return t.detach().to(at::kFloat); };
  const at::Tensor rows = at::arange(4, at::kLong), cols = at::arange(8, 12, at::kLong);
  const at::Tensor q = f32(in.q).index_select(2, rows), k = f32(in.k).index_select(2, cols),
                   v = f32(in.v).index_select(2, cols);
  const loom_ops::BlockMask hidden{false, causal(rows, cols).to(at::kFloat)};
  const loom_ops::BlockAttention none = loom_ops::attend_block_forward(q, k, v, hidden, kScale);
  CHECK(at::isinf(none.lse).all().item<bool>());
  CHECK(none.out.abs().max().item<double>() == 0.0);
  const loom_ops::BlockGradients g = loom_ops::attend_block_backward(at::ones_like(q), q, k, v, hidden, kScale, none);
  for (const at::Tensor& t : {g.q, g.k, g.v}) CHECK(t.abs().max().item<double>() == 0.0);
  CHECK_THROWS_AS(loom_ops::attend_block_forward(q, k.narrow(2, 0, 3), v.narrow(2, 0, 3), {true, {}}, kScale),
                  std::invalid_argument);  // a causal block is square
}
