// The gpt and llama attention (plugins/models/transformer/layers/attention.hpp, LibTorch's
// scaled_dot_product_attention) against PyTorch's math path run in double precision with the
// mask written out: outputs and the gradients of q, k and v, for each layout the plugins use.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <vector>

#include "layers/attention.hpp"

namespace {

// The largest difference relative to the largest value.
double error(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs().max() / want.abs().max()).item<double>();
}

struct Case {
  int64_t B, H, K, T, S, D;
};

// Runs causal_attention in float on q, k, v and the math path in double with `bias` (the
// additive mask in full: (T, S) or (B, 1, T, S)); checks the output and the three gradients.
void check_against_math(const Case& c, const at::Tensor& layout_mask, const at::Tensor& bias) {
  at::manual_seed(11);
  const at::Tensor q = at::randn({c.B, c.H, c.T, c.D}), k = at::randn({c.B, c.K, c.S, c.D}),
                   v = at::randn({c.B, c.K, c.S, c.D}), w = at::randn({c.B, c.H, c.T, c.D});
  std::vector<at::Tensor> in{q.clone().requires_grad_(true), k.clone().requires_grad_(true),
                             v.clone().requires_grad_(true)};
  const at::Tensor y = loom_gpt::causal_attention(in[0], in[1], in[2], layout_mask, 0.0, true);
  const auto grads = torch::autograd::grad({(y * w).sum()}, in);

  std::vector<at::Tensor> ref{q.to(at::kDouble).requires_grad_(true), k.to(at::kDouble).requires_grad_(true),
                              v.to(at::kDouble).requires_grad_(true)};
  const at::Tensor y64 = std::get<0>(at::_scaled_dot_product_attention_math(
      ref[0], ref[1], ref[2], bias.to(at::kDouble), 0.0, false, c10::nullopt, c10::nullopt, c.K != c.H));
  const auto grads64 = torch::autograd::grad({(y64 * w.to(at::kDouble)).sum()}, ref);

  MESSAGE("H " << c.H << " K " << c.K << " T " << c.T << " S " << c.S << ": output " << error(y, y64) << ", dq "
               << error(grads[0], grads64[0]) << ", dk " << error(grads[1], grads64[1]) << ", dv "
               << error(grads[2], grads64[2]));
  CHECK(y.sizes().vec() == y64.sizes().vec());
  CHECK(error(y, y64) < 1e-5);
  for (size_t i = 0; i < 3; ++i) CHECK(error(grads[i], grads64[i]) < 1e-5);
}

// The causal bias written out for queries at positions S-T..S-1 over keys 0..S-1.
at::Tensor causal_bias(int64_t T, int64_t S) {
  const at::Tensor query_pos = at::arange(S - T, S, at::kLong).unsqueeze(1);  // (T, 1)
  const at::Tensor key_pos = at::arange(S, at::kLong).unsqueeze(0);           // (1, S)
  return at::zeros({T, S}).masked_fill(key_pos > query_pos, -INFINITY);
}

}  // namespace

TEST_CASE("attention: the causal layout, one key/value head per query head") {
  const Case c{2, 4, 4, 150, 150, 16};
  check_against_math(c, loom_gpt::causal_mask(160, at::kCPU), causal_bias(c.T, c.S));
}

TEST_CASE("attention: grouped-query heads read their shared key/value head") {
  const Case c{2, 6, 2, 70, 70, 8};
  check_against_math(c, loom_gpt::causal_mask(80, at::kCPU), causal_bias(c.T, c.S));
}

TEST_CASE("attention: decoding steps after a cache of earlier positions") {
  for (const int64_t T : {1, 3}) {
    const Case c{2, 4, 2, T, 20, 8};
    check_against_math(c, loom_gpt::causal_mask(32, at::kCPU), causal_bias(c.T, c.S));
  }
}

TEST_CASE("attention: packed documents never attend across a boundary") {
  const Case c{2, 4, 2, 40, 40, 8};
  // Row 0: documents of 10, 25 and 5 tokens; row 1: one document.
  std::vector<int64_t> ids(2 * 40, 0);
  for (int64_t t = 0; t < 40; ++t) ids[t] = t < 10 ? 0 : (t < 35 ? 1 : 2);
  const at::Tensor docs = at::tensor(ids, at::kLong).view({2, 40});
  const at::Tensor other = docs.unsqueeze(2).ne(docs.unsqueeze(1));                                    // (B, T, T)
  const at::Tensor packed = loom_gpt::causal_mask(40, at::kCPU).unsqueeze(0).masked_fill(other, -INFINITY);  // as packing.hpp
  const at::Tensor bias = causal_bias(40, 40).unsqueeze(0).masked_fill(other, -INFINITY).unsqueeze(1);  // (B, 1, T, T)
  check_against_math(c, packed, bias);
}

TEST_CASE("attention: dropout only in training, and bf16 close to float") {
  at::manual_seed(3);
  const at::Tensor q = at::randn({2, 4, 64, 16}), k = at::randn({2, 4, 64, 16}), v = at::randn({2, 4, 64, 16});
  const at::Tensor mask = loom_gpt::causal_mask(64, at::kCPU);
  const at::Tensor plain = loom_gpt::causal_attention(q, k, v, mask, 0.0, true);
  CHECK(at::equal(loom_gpt::causal_attention(q, k, v, mask, 0.3, false), plain));  // evaluation: no dropout
  const at::Tensor dropped = loom_gpt::causal_attention(q, k, v, mask, 0.3, true);
  CHECK_FALSE(at::allclose(dropped, plain));
  CHECK(std::isfinite(dropped.abs().max().item<double>()));
  const at::Tensor half = loom_gpt::causal_attention(q.to(at::kBFloat16), k.to(at::kBFloat16), v.to(at::kBFloat16),
                                                     mask, 0.0, true);
  CHECK((half.scalar_type() == at::kBFloat16));
  CHECK(error(half, plain.to(at::kDouble)) < 2e-2);
}
