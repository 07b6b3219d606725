// ops_gpu_test.cpp: every op on a CUDA device against its reference (ctest label `gpu`):
// loom_ops_cuda's kernels in each dtype they take, values and gradients, and the ops' ATen
// entry points as the models call them on a GPU. Without a CUDA device it prints why and exits
// 77, which ctest reports as skipped. On the GPU machine: ctest -L gpu (tools/device-check).
#define DOCTEST_CONFIG_IMPLEMENT
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <loom_ops/add_layer_norm.hpp>
#include <loom_ops/add_rms_norm.hpp>
#include <loom_ops/block_attention.hpp>
#include <loom_ops/chunked_loss.hpp>
#include <loom_ops/cross_entropy_rows.hpp>
#include <loom_ops/cuda_kernels.hpp>
#include <loom_ops/fused_adamw.hpp>
#include <loom_ops/gelu_tanh.hpp>
#include <loom_ops/moe_permutation.hpp>
#include <loom_ops/rope_heads.hpp>
#include <loom_ops/swiglu.hpp>
#include <loom_ops/grouped_linear.hpp>
#include <loom_ops/rms_norm.hpp>
#include <loom_ops/rotary.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "add_norm_check.hpp"
#include "largest_error.hpp"

using loom_ops_test::largest_error;

namespace {

const at::TensorOptions kCuda = at::TensorOptions().device(at::kCUDA);

// (value, gradient of sum(y * w)) for f at x.
template <class F>
std::pair<at::Tensor, at::Tensor> value_and_grad(F f, const at::Tensor& x, const at::Tensor& w) {
  const at::Tensor input = x.detach().clone().requires_grad_(true);
  const at::Tensor y = f(input);
  return {y.detach(), torch::autograd::grad({(y * w).sum()}, {input})[0]};
}

}  // namespace

TEST_CASE("cuda::add_layer_norm: the reference's values and gradients in float32, bfloat16 and float16") {
  // Rows narrower and wider than a block's 256 threads, 700 rows (more than backward's 512
  // blocks), with and without a bias, gradients through both outputs and through y alone.
  at::manual_seed(18);
  struct Case { at::ScalarType type; double value, gradient; };
  for (const int64_t d : {40, 768, 4099}) {
    CAPTURE(d);
    const at::Tensor x = at::randn({700, d}, kCuda) * 2 + 3, delta = at::randn({700, d}, kCuda);
    const at::Tensor w = at::rand({d}, kCuda) + 0.5, bias = at::randn({d}, kCuda);
    const at::Tensor a = at::randn({700, d}, kCuda), gy = at::randn({700, d}, kCuda);
    for (const Case c : {Case{at::kFloat, 2e-6, 2e-5}, Case{at::kBFloat16, 1e-2, 3e-2}, Case{at::kHalf, 2e-3, 5e-3}}) {
      const std::string type_name = c10::toString(c.type);
      CAPTURE(type_name);
      for (const bool with_bias : {true, false}) {
        for (const bool through_s : {true, false}) {
          CAPTURE(with_bias);
          CAPTURE(through_s);
          const std::vector<double> errors = loom_ops_test::add_norm_errors(
              loom_ops::cuda::add_layer_norm, loom_ops::reference::add_layer_norm, x.to(c.type), delta.to(c.type),
              w.to(c.type), with_bias ? bias.to(c.type) : at::Tensor(), through_s ? a : at::Tensor(), gy);
          for (size_t k = 0; k < errors.size(); ++k) {
            CAPTURE(k);  // s, y, then the gradients of x, delta, w and b
            CHECK(errors[k] < (k < 2 ? c.value : c.gradient));
          }
        }
      }
    }
  }
  {  // autocast's residual stream: a float32 x and w beside a bfloat16 or float16 delta; the
     // gradient of delta arrives rounded to its dtype
    const at::Tensor x = at::randn({300, 768}, kCuda) * 2 + 3, delta = at::randn({300, 768}, kCuda);
    const at::Tensor w = at::rand({768}, kCuda) + 0.5, bias = at::randn({768}, kCuda), a = at::randn({300, 768}, kCuda);
    for (const at::ScalarType branch : {at::kBFloat16, at::kHalf}) {
      const std::vector<double> errors = loom_ops_test::add_norm_errors(
          loom_ops::cuda::add_layer_norm, loom_ops::reference::add_layer_norm, x, delta.to(branch), w, bias, a, x);
      for (size_t k = 0; k < errors.size(); ++k) {
        CAPTURE(k);
        CHECK(errors[k] < (k < 2 ? 2e-6 : k == 3 ? 1e-2 : 2e-5));
      }
    }
  }
  {  // no rows: empty outputs and zero gradients of w and b (no block runs)
    const at::Tensor w = (at::rand({16}, kCuda) + 0.5).requires_grad_(true), bias = at::zeros({16}, kCuda).requires_grad_(true);
    const auto [s, y] = loom_ops::cuda::add_layer_norm(at::zeros({0, 16}, kCuda), at::zeros({0, 16}, kCuda), w, bias, 1e-5);
    CHECK(y.numel() == 0);
    const auto grads = torch::autograd::grad({y.sum()}, {w, bias});
    CHECK(grads[0].abs().sum().item<double>() == 0.0);
    CHECK(grads[1].abs().sum().item<double>() == 0.0);
  }
  CHECK_THROWS_AS(loom_ops::cuda::add_layer_norm(at::randn({2, 8}, kCuda), at::randn({2, 8}, kCuda),
                                                 at::ones({8}, kCuda).to(at::kBFloat16), {}, 1e-5),
                  std::invalid_argument);
}

TEST_CASE("cuda::add_rms_norm: the reference's values and gradients in float32, bfloat16 and float16") {
  // Rows narrower and wider than a block's 256 threads, 700 rows (more than backward's 512
  // blocks), gradients through both outputs and through y alone.
  at::manual_seed(8);
  struct Case { at::ScalarType type; double value, gradient; };
  for (const int64_t d : {40, 1000, 4099}) {
    CAPTURE(d);
    const at::Tensor x = at::randn({700, d}, kCuda) * 2, delta = at::randn({700, d}, kCuda);
    const at::Tensor w = at::rand({d}, kCuda) + 0.5, a = at::randn({700, d}, kCuda), b = at::randn({700, d}, kCuda);
    for (const Case c : {Case{at::kFloat, 2e-6, 2e-5}, Case{at::kBFloat16, 1e-2, 3e-2}, Case{at::kHalf, 2e-3, 5e-3}}) {
      const std::string type_name = c10::toString(c.type);
      CAPTURE(type_name);
      for (const bool through_s : {true, false}) {
        CAPTURE(through_s);
        const std::vector<double> errors = loom_ops_test::add_rms_norm_errors(
            loom_ops::cuda::add_rms_norm, x.to(c.type), delta.to(c.type), w.to(c.type), through_s ? a : at::Tensor(), b);
        for (size_t k = 0; k < errors.size(); ++k) {
          CAPTURE(k);  // s, y, then the gradients of x, delta and w
          CHECK(errors[k] < (k < 2 ? c.value : c.gradient));
        }
      }
    }
  }
  {  // autocast's residual stream: a float32 x and w beside a bfloat16 or float16 delta
    const at::Tensor x = at::randn({300, 1000}, kCuda) * 2, delta = at::randn({300, 1000}, kCuda);
    const at::Tensor w = at::rand({1000}, kCuda) + 0.5, a = at::randn({300, 1000}, kCuda);
    for (const at::ScalarType branch : {at::kBFloat16, at::kHalf}) {
      const std::vector<double> errors =
          loom_ops_test::add_rms_norm_errors(loom_ops::cuda::add_rms_norm, x, delta.to(branch), w, a, x);
      for (size_t k = 0; k < errors.size(); ++k) {
        CAPTURE(k);  // the gradient of delta (3) arrives rounded to its dtype
        CHECK(errors[k] < (k < 2 ? 2e-6 : k == 3 ? 1e-2 : 2e-5));
      }
    }
    CHECK_THROWS_AS(loom_ops::cuda::add_rms_norm(x.to(at::kBFloat16), delta, w.to(at::kBFloat16), 1e-6),
                    std::invalid_argument);  // a float32 branch beside a bfloat16 x would widen the sum
  }
  {  // no rows: empty outputs and a zero gradient of w (no block runs)
    const at::Tensor w = (at::rand({16}, kCuda) + 0.5).requires_grad_(true);
    const auto [s, y] = loom_ops::cuda::add_rms_norm(at::zeros({0, 16}, kCuda), at::zeros({0, 16}, kCuda), w, 1e-6);
    CHECK(y.numel() == 0);
    CHECK(torch::autograd::grad({y.sum()}, {w})[0].abs().sum().item<double>() == 0.0);
  }
  CHECK_THROWS_AS(loom_ops::cuda::add_rms_norm(at::randn({2, 8}, kCuda), at::randn({2, 8}, kCuda),
                                               at::ones({8}, kCuda).to(at::kBFloat16), 1e-6),
                  std::invalid_argument);
}

TEST_CASE("cuda::rms_norm: the reference's values and gradients in float32, bfloat16 and float16") {
  // add_rms_norm's kernels with no delta: rows narrower and wider than a block, 700 rows.
  at::manual_seed(12);
  struct Case { at::ScalarType type; double value, gradient; };
  for (const int64_t d : {40, 1000, 4099}) {
    CAPTURE(d);
    const at::Tensor x = at::randn({700, d}, kCuda) * 2, w = at::rand({d}, kCuda) + 0.5, gy = at::randn({700, d}, kCuda);
    for (const Case c : {Case{at::kFloat, 2e-6, 2e-5}, Case{at::kBFloat16, 1e-2, 3e-2}, Case{at::kHalf, 2e-3, 5e-3}}) {
      const std::string type_name = c10::toString(c.type);
      CAPTURE(type_name);
      const auto outputs = [&](const at::Tensor& xs, const at::Tensor& ws, bool kernel) {
        const at::Tensor xi = xs.detach().clone().requires_grad_(true), wi = ws.detach().clone().requires_grad_(true);
        const at::Tensor y = kernel ? loom_ops::cuda::rms_norm(xi, wi, 1e-6) : loom_ops::reference::rms_norm(xi, wi, 1e-6);
        const auto grads = torch::autograd::grad({(y * gy.to(y.scalar_type())).sum()}, {xi, wi});
        return std::vector<at::Tensor>{y.detach(), grads[0], grads[1]};
      };
      const auto got = outputs(x.to(c.type), w.to(c.type), true);
      const auto want = outputs(x.to(c.type).to(at::kDouble), w.to(c.type).to(at::kDouble), false);
      for (size_t k = 0; k < got.size(); ++k) {
        CAPTURE(k);  // y, then the gradients of x and w
        CHECK((got[k].scalar_type() == c.type));
        CHECK(largest_error(got[k], want[k]) < (k == 0 ? c.value : c.gradient));
      }
    }
  }
  {  // no rows: an empty output and a zero gradient of w
    const at::Tensor w = (at::rand({16}, kCuda) + 0.5).requires_grad_(true);
    const at::Tensor y = loom_ops::cuda::rms_norm(at::zeros({0, 16}, kCuda), w, 1e-6);
    CHECK(y.numel() == 0);
    CHECK(torch::autograd::grad({y.sum()}, {w})[0].abs().sum().item<double>() == 0.0);
  }
  CHECK_THROWS_AS(loom_ops::cuda::rms_norm(at::randn({2, 8}, kCuda), at::ones({8}, kCuda).to(at::kBFloat16), 1e-6),
                  std::invalid_argument);
}

TEST_CASE("cuda::rope_heads: the reference's values and gradients in float32, bfloat16 and float16") {
  // Heads of 64, 128 and 256 channels (2 to 8 pairs a lane), with and without Qwen3's per-head
  // norm (its weight of x's dtype, or float32 as under autocast: the result then float32), with
  // and without packed positions; more rows than one launch's blocks hold.
  at::manual_seed(13);
  for (const int64_t D : {64, 128, 256}) {
    const loom_ops::Rope rope(300, D, 10000.0, kCuda.device());
    loom_ops::Rope exact_table;
    exact_table.cos = rope.cos.to(at::kDouble);
    exact_table.sin = rope.sin.to(at::kDouble);
    const at::Tensor x = at::randn({4, 260, 40, D}, kCuda) * 2, w = at::rand({D}, kCuda) + 0.5;
    const at::Tensor a = at::randn({4, 40, 260, D}, kCuda), packed = at::randint(0, 300, {4, 260}, kCuda.dtype(at::kLong));
    struct Case { at::ScalarType type, weight_type; double value, gradient; };
    for (const Case c : {Case{at::kFloat, at::kFloat, 2e-6, 2e-5}, Case{at::kBFloat16, at::kBFloat16, 2e-2, 4e-2},
                         Case{at::kBFloat16, at::kFloat, 1e-2, 3e-2}, Case{at::kHalf, at::kHalf, 3e-3, 6e-3}}) {
      for (const bool norm : {false, true}) {
        for (const bool with_positions : {false, true}) {
          const std::string type_name = c10::toString(c.type), weight_name = c10::toString(c.weight_type);
          CAPTURE(D);
          CAPTURE(type_name);
          CAPTURE(weight_name);
          CAPTURE(norm);
          CAPTURE(with_positions);
          const at::Tensor positions = with_positions ? packed : at::Tensor();
          // y, then the gradients of sum(y * a) with respect to x and (with a norm) w.
          const auto run = [&](auto op, const loom_ops::Rope& table, at::ScalarType type, at::ScalarType weight_type) {
            const at::Tensor in = x.to(type).requires_grad_(true);
            const at::Tensor weight = norm ? w.to(weight_type).requires_grad_(true) : at::Tensor();
            const at::Tensor y = op(table, in, positions, weight, 1e-6);
            std::vector<at::Tensor> wrt{in};
            if (norm) wrt.push_back(weight);
            auto out = torch::autograd::grad({(y * a.to(y.scalar_type())).sum()}, wrt);
            out.insert(out.begin(), y.detach());
            return out;
          };
          const auto got = run(loom_ops::cuda::rope_heads, rope, c.type, c.weight_type);
          const auto exact = run(loom_ops::reference::rope_heads, exact_table, at::kDouble, at::kDouble);
          CHECK((got[0].scalar_type() == (norm ? c.weight_type : c.type)));
          CHECK(got[0].is_contiguous());
          for (size_t k = 0; k < got.size(); ++k) {
            CAPTURE(k);  // y, d x, d w
            CHECK(largest_error(got[k], exact[k]) < (k == 0 ? c.value : c.gradient));
          }
        }
      }
    }
  }
  const loom_ops::Rope rope(8, 8, 10000.0, kCuda.device());
  CHECK(loom_ops::cuda::rope_heads(rope, at::empty({0, 4, 2, 8}, kCuda), at::Tensor(), at::Tensor(), 1e-6).numel() == 0);
  CHECK_THROWS_AS(loom_ops::cuda::rope_heads(rope, at::randn({1, 4, 2, 8}), at::Tensor(), at::Tensor(), 1e-6),
                  std::invalid_argument);  // x on the CPU
  CHECK_THROWS_AS(loom_ops::cuda::rope_heads(rope, at::randn({1, 4, 2, 8}, kCuda.dtype(at::kBFloat16)), at::Tensor(),
                                             at::ones({8}, kCuda.dtype(at::kHalf)), 1e-6),
                  std::invalid_argument);  // a norm weight of a third dtype
}

TEST_CASE("cuda::swiglu: the reference's values and gradients in float32, bfloat16 and float16") {
  at::manual_seed(5);
  const at::Tensor gate = at::cat({at::randn({1'000'003}) * 3, at::linspace(-30, 30, 4001)}).to(kCuda.device());
  const at::Tensor up = at::randn_like(gate), w = at::randn_like(gate);
  // y, then the gradients of sum(y * w) with respect to gate and up.
  const auto run = [&](auto f, at::ScalarType type) {
    const at::Tensor g = gate.to(type).requires_grad_(true), u = up.to(type).requires_grad_(true);
    const at::Tensor y = f(g, u);
    const auto grads = torch::autograd::grad({(y * w.to(type)).sum()}, {g, u});
    return std::vector<at::Tensor>{y.detach(), grads[0], grads[1]};
  };
  const std::vector<at::Tensor> exact = run(loom_ops::reference::swiglu, at::kDouble);
  struct Case { at::ScalarType type; double value, gradient; };
  for (const Case c : {Case{at::kFloat, 1e-6, 2e-6}, Case{at::kBFloat16, 1e-2, 2e-2}, Case{at::kHalf, 2e-3, 4e-3}}) {
    const std::string type_name = c10::toString(c.type);
    CAPTURE(type_name);
    const std::vector<at::Tensor> got = run(loom_ops::cuda::swiglu, c.type);
    CHECK((got[0].scalar_type() == c.type));
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);  // y, d gate, d up
      CHECK(largest_error(got[k], exact[k]) < (k == 0 ? c.value : c.gradient));
    }
  }
  const at::Tensor strided = at::randn({64, 64}, kCuda).t(), other = at::randn({64, 64}, kCuda);
  CHECK(largest_error(loom_ops::cuda::swiglu(strided, other), loom_ops::reference::swiglu(strided, other)) < 1e-6);
  CHECK(loom_ops::cuda::swiglu(at::empty({0}, kCuda), at::empty({0}, kCuda)).numel() == 0);
  CHECK_THROWS_AS(loom_ops::cuda::swiglu(at::randn({4}), at::randn({4})), std::invalid_argument);
  CHECK_THROWS_AS(loom_ops::cuda::swiglu(at::randn({4}, kCuda), at::randn({2, 4}, kCuda)), std::invalid_argument);
}

TEST_CASE("cuda::moe_permute and cuda::moe_combine: the reference's values and gradients, the same bits twice") {
  // 3000 tokens choosing 4 of 16 experts, rows narrower and wider than a block's 256 threads.
  at::manual_seed(21);
  for (const int64_t C : {40, 1000}) {
    CAPTURE(C);
    const int64_t N = 3000, E = 16, k = 4;
    const at::Tensor chosen = std::get<1>(at::rand({N, E}, kCuda).topk(k, -1));
    const at::Tensor order = std::get<1>(chosen.reshape({-1}).sort(std::optional<bool>(true), 0, false));
    const at::Tensor x = at::randn({N, C}, kCuda), top = at::rand({N, k}, kCuda), scale = at::randn({N * k, C}, kCuda);
    const at::Tensor w = at::randn({N, C}, kCuda);
    // rows, y, d x, d top of sum(combine(permute(x) * scale, top) * w).
    const auto run = [&](auto permute, auto combine, at::ScalarType type) {
      const at::Tensor xs = x.to(type).requires_grad_(true), ts = top.to(type).requires_grad_(true);
      const at::Tensor rows = permute(xs, order, k);
      const at::Tensor y = combine(rows * scale.to(type), order, ts);
      const auto grads = torch::autograd::grad({(y * w.to(type)).sum()}, {xs, ts});
      return std::vector<at::Tensor>{rows.detach(), y.detach(), grads[0], grads[1]};
    };
    const auto exact = run(loom_ops::reference::moe_permute, loom_ops::reference::moe_combine, at::kDouble);
    struct Case { at::ScalarType type; double error; };
    for (const Case c : {Case{at::kFloat, 1e-5}, Case{at::kBFloat16, 2e-2}, Case{at::kHalf, 4e-3}}) {
      const std::string type_name = c10::toString(c.type);
      CAPTURE(type_name);
      const auto got = run(loom_ops::cuda::moe_permute, loom_ops::cuda::moe_combine, c.type);
      const auto again = run(loom_ops::cuda::moe_permute, loom_ops::cuda::moe_combine, c.type);
      for (size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);  // rows, y, d x, d top
        CHECK((got[i].scalar_type() == c.type));
        CHECK(largest_error(got[i], exact[i]) < c.error);
        CHECK(at::equal(got[i], again[i]));  // no atomics: the same bits every run
      }
    }
    // The entry points on CUDA are the reference until a GPU has run the kernels.
    CHECK(at::equal(loom_ops::moe_combine(x.repeat_interleave(k, 0), order, top),
                    loom_ops::reference::moe_combine(x.repeat_interleave(k, 0), order, top)));
  }
  CHECK_THROWS_AS(loom_ops::cuda::moe_permute(at::randn({4, 3}), at::arange(8, at::kLong), 2), std::invalid_argument);
  CHECK(loom_ops::cuda::moe_permute(at::empty({0, 3}, kCuda), at::empty({0}, kCuda.dtype(at::kLong)), 2).numel() == 0);
}

TEST_CASE("cuda::cross_entropy_rows: the reference's losses and gradients in float32, bfloat16 and float16") {
  // Rows narrower and wider than a block's 256 threads up to GPT-2's vocabulary, every seventh
  // row ignored, and the extremes of the CPU test: -inf, +inf and NaN logits.
  at::manual_seed(23);
  for (const int64_t V : {50, 4099, 50304}) {
    CAPTURE(V);
    const int64_t n = 300;
    const at::Tensor logits = at::randn({n, V}, kCuda) * 4 + 30;
    at::Tensor targets = at::randint(0, V, {n}, kCuda.dtype(at::kLong));
    targets.index_put_({at::arange(0, n, 7, kCuda.dtype(at::kLong))}, -100);
    // The reference itself in fp32 against double: the bound the kernel's fp32 case is held to.
    const at::Tensor exact_loss = loom_ops::reference::cross_entropy_rows(logits.to(at::kDouble), targets, -100, false);
    struct Case { at::ScalarType type; double loss, gradient; };
    for (const Case c : {Case{at::kFloat, 1e-6, 1e-6}, Case{at::kBFloat16, 1e-2, 1e-2}, Case{at::kHalf, 2e-3, 2e-3}}) {
      const std::string type_name = c10::toString(c.type);
      CAPTURE(type_name);
      // Each path's own rounding of the logits, so that only the arithmetic differs.
      const at::Tensor ours = logits.to(c.type), theirs = logits.to(c.type).to(at::kDouble);
      const at::Tensor loss = loom_ops::cuda::cross_entropy_rows(ours, targets, -100, true);
      const at::Tensor want = loom_ops::reference::cross_entropy_rows(theirs, targets, -100, true);
      CHECK((loss.scalar_type() == at::kFloat));
      CHECK(largest_error(loss, want) < c.loss);
      CHECK(largest_error(ours, theirs) < c.gradient);
      const at::Tensor kept = logits.to(c.type), unchanged = kept.clone();
      CHECK(at::equal(loom_ops::cuda::cross_entropy_rows(kept, targets, -100, false), loss));
      CHECK(at::equal(kept, unchanged));
    }
    CHECK(largest_error(exact_loss, loom_ops::reference::cross_entropy_rows(logits.clone(), targets, -100, true)) < 1e-6);
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  at::Tensor extremes = at::randn({4, 9000}, kCuda);
  extremes[0].narrow(0, 0, 4096).fill_(-inf);
  extremes[1].fill_(-inf);
  extremes[2][5000] = inf;
  extremes[3][17] = nan;
  const at::Tensor targets = at::tensor({5000, 5000, 0, 0}, kCuda.dtype(at::kLong));
  const at::Tensor theirs = extremes.clone(), ours = extremes.clone();
  const at::Tensor want = loom_ops::reference::cross_entropy_rows(theirs, targets, -100, true);
  const at::Tensor got = loom_ops::cuda::cross_entropy_rows(ours, targets, -100, true);
  CHECK(at::equal(got.isnan(), want.isnan()));
  CHECK(largest_error(got[0], want[0]) < 1e-6);
  CHECK(largest_error(ours[0], theirs[0]) < 1e-6);
  CHECK(loom_ops::cuda::cross_entropy_rows(at::empty({0, 5}, kCuda), at::empty({0}, kCuda.dtype(at::kLong)), -100, true)
            .numel() == 0);
  CHECK_THROWS_AS(loom_ops::cuda::cross_entropy_rows(at::randn({2, 5}), at::zeros({2}, at::kLong), -100, true),
                  std::invalid_argument);
}

TEST_CASE("cuda::gelu_tanh: the reference's values and gradients in float32, bfloat16 and float16") {
  at::manual_seed(3);
  const at::Tensor x = at::cat({at::randn({1'000'003}) * 3, at::linspace(-30, 30, 4001)}).to(kCuda.device());
  const at::Tensor w = at::randn_like(x);
  struct Case { at::ScalarType type; double value, gradient; };
  for (const Case c : {Case{at::kFloat, 1e-6, 4e-6}, Case{at::kBFloat16, 1e-2, 2e-2}, Case{at::kHalf, 2e-3, 4e-3}}) {
    const std::string type_name = c10::toString(c.type);
    CAPTURE(type_name);
    const auto [y, grad] = value_and_grad(loom_ops::cuda::gelu_tanh, x.to(c.type), w.to(c.type));
    const auto [y_ref, grad_ref] = value_and_grad(loom_ops::reference::gelu_tanh, x.to(at::kDouble), w.to(at::kDouble));
    CHECK((y.scalar_type() == c.type));
    CHECK(largest_error(y, y_ref) < c.value);
    CHECK(largest_error(grad, grad_ref) < c.gradient);
  }
  const at::Tensor strided = at::randn({64, 64}, kCuda).t();  // not contiguous: copied first
  CHECK(largest_error(loom_ops::cuda::gelu_tanh(strided), loom_ops::reference::gelu_tanh(strided)) < 1e-6);
  CHECK(loom_ops::cuda::gelu_tanh(at::empty({0}, kCuda)).numel() == 0);
  CHECK_THROWS_AS(loom_ops::cuda::gelu_tanh(at::randn({4})), std::invalid_argument);
  CHECK_THROWS_AS(loom_ops::cuda::gelu_tanh(at::randn({4}, kCuda.dtype(at::kDouble))), std::invalid_argument);
}

TEST_CASE("the ops' entry points on CUDA: the reference's numbers") {
  at::manual_seed(8);
  // GELU as the models call it (at::gelu on CUDA today).
  const at::Tensor x = at::randn({4096}, kCuda);
  CHECK(largest_error(loom_ops::gelu_tanh(x), loom_ops::reference::gelu_tanh(x.to(at::kDouble))) < 1e-6);

  // The chunked loss: bf16 products, fp32 loss, against whole logits in fp32.
  const int64_t N = 300, C = 64, V = 1000;
  const at::Tensor hidden = at::randn({N, C}, kCuda), weight = at::randn({V, C}, kCuda) * 0.1;
  at::Tensor targets = at::randint(0, V, {N}, kCuda.dtype(at::kLong));
  targets.index_put_({at::arange(0, N, 7, kCuda.dtype(at::kLong))}, -100);
  const at::Tensor chunked = loom_ops::chunked_linear_cross_entropy(hidden, weight, targets, -100, 64);
  CHECK(largest_error(chunked, loom_ops::reference::linear_cross_entropy(hidden, weight, targets, -100)) < 1e-5);

  // The experts' grouped products in bfloat16 (at::_grouped_mm's CUDA kernel).
  const at::Tensor counts = at::tensor({5, 0, 19, 8}, at::kLong);
  std::vector<at::Tensor> experts;
  for (int e = 0; e < 4; ++e) experts.push_back(at::randn({48, 32}, kCuda.dtype(at::kBFloat16)));
  const at::Tensor rows = at::randn({32, 32}, kCuda.dtype(at::kBFloat16));
  const at::Tensor grouped = loom_ops::grouped_linear(rows, experts, counts.to(at::kCUDA));
  CHECK(largest_error(grouped, loom_ops::reference::grouped_linear(rows, experts, counts)) < 1e-2);

  // RMSNorm and rotary: the CPU's numbers.
  const at::Tensor h = at::randn({2, 9, 64}, kCuda), scale = at::rand({64}, kCuda) + 0.5;
  CHECK(largest_error(loom_ops::rms_norm(h, scale, 1e-6), loom_ops::rms_norm(h.cpu(), scale.cpu(), 1e-6)) < 1e-6);
  const loom_ops::Rope on_gpu(32, 16, 10000.0, kCuda.device()), on_cpu(32, 16, 10000.0, at::kCPU);
  const at::Tensor q = at::randn({2, 4, 9, 16}, kCuda);
  CHECK(largest_error(on_gpu.apply(q), on_cpu.apply(q.cpu())) < 1e-6);

  // Ring attention's blocks: two causal halves of the keys merged, against all keys at once.
  const at::Tensor bq = at::randn({2, 4, 12, 16}, kCuda), bk = at::randn({2, 2, 12, 16}, kCuda),
                   bv = at::randn({2, 2, 12, 16}, kCuda);
  const at::Tensor causal = at::zeros({12, 12}, kCuda).masked_fill(at::ones({12, 12}, kCuda).triu(1).to(at::kBool), -INFINITY);
  const auto half = [&](int64_t from) {
    return loom_ops::attend_block(bq, bk.narrow(2, from, 6), bv.narrow(2, from, 6), causal.narrow(1, from, 6), 0.25);
  };
  const at::Tensor merged = loom_ops::merge_blocks(half(6), half(0)).out;
  CHECK(largest_error(merged, loom_ops::reference::attention(bq.cpu().to(at::kDouble), bk.cpu().to(at::kDouble),
                                                             bv.cpu().to(at::kDouble), causal.cpu().to(at::kDouble),
                                                             0.25)) < 1e-5);
  // The block pair without autograd (CUDA: the arithmetic from the scores) against the CPU's
  // fused flash kernels, on one causal block: values, log-sum-exp and gradients.
  const loom_ops::BlockMask own{true, {}};
  const loom_ops::BlockAttention on_cuda = loom_ops::attend_block_forward(bq, bk, bv, own, 0.25),
                                 on_host = loom_ops::attend_block_forward(bq.cpu(), bk.cpu(), bv.cpu(), own, 0.25);
  CHECK(largest_error(on_cuda.out, on_host.out) < 1e-5);
  CHECK(largest_error(on_cuda.lse, on_host.lse) < 1e-5);
  const at::Tensor up = at::randn_like(bq);
  const loom_ops::BlockGradients cuda_grads = loom_ops::attend_block_backward(up, bq, bk, bv, own, 0.25, on_cuda),
                                 host_grads = loom_ops::attend_block_backward(up.cpu(), bq.cpu(), bk.cpu(), bv.cpu(),
                                                                              own, 0.25, on_host);
  CHECK(largest_error(cuda_grads.q, host_grads.q) < 1e-4);
  CHECK(largest_error(cuda_grads.k, host_grads.k) < 1e-4);
  CHECK(largest_error(cuda_grads.v, host_grads.v) < 1e-4);

  // AdamW through LibTorch's fused CUDA kernel against the eight tensor ops.
  const at::Tensor p0 = at::randn({100'003}, kCuda), mask = (at::rand({100'003}, kCuda) < 0.7).to(at::kFloat);
  at::Tensor p1 = p0.clone(), m1 = at::zeros_like(p0), v1 = at::zeros_like(p0);
  at::Tensor p2 = p0.clone(), m2 = at::zeros_like(p0), v2 = at::zeros_like(p0);
  loom_ops::AdamWScratch s1, s2;
  for (int step = 1; step <= 3; ++step) {
    const at::Tensor g = at::randn_like(p0) * 0.01;
    const loom_ops::AdamWStep hyper{1e-3, 0.9, 0.999, 1e-8, 0.1, 1.0 - std::pow(0.9, step),
                                    std::sqrt(1.0 - std::pow(0.999, step)), step};
    loom_ops::adamw_step(p1, g, m1, v1, mask, s1, hyper);
    loom_ops::adamw_step_tensor_ops(p2, g, m2, v2, mask, s2, hyper);
  }
  CHECK(largest_error(p1, p2) < 1e-6);
}

TEST_CASE("cuda::use_kernels: the entry points run the kernels on what they take, ATen on the rest") {
  at::manual_seed(9);
  const auto bf16 = kCuda.dtype(at::kBFloat16);
  const at::Tensor x = at::randn({64, 96}, bf16), d = at::randn({64, 96}, bf16), w = at::rand({96}, bf16) + 0.5;
  const at::Tensor x32 = x.to(at::kFloat), w32 = w.to(at::kFloat);
  loom_ops::cuda::use_kernels(true);
  CHECK(loom_ops::cuda_kernels_in_use());
  // Taken: the kernels' own bits.
  CHECK(at::equal(loom_ops::gelu_tanh(x), loom_ops::cuda::gelu_tanh(x)));
  CHECK(at::equal(loom_ops::swiglu(x, d), loom_ops::cuda::swiglu(x, d)));
  CHECK(at::equal(loom_ops::add_rms_norm(x, d, w, 1e-6).second, loom_ops::cuda::add_rms_norm(x, d, w, 1e-6).second));
  CHECK(at::equal(loom_ops::rms_norm(x, w, 1e-6), loom_ops::cuda::rms_norm(x, w, 1e-6)));
  CHECK(at::equal(loom_ops::add_layer_norm(x, d, w, w, 1e-5).second,
                  loom_ops::cuda::add_layer_norm(x, d, w, w, 1e-5).second));
  const loom_ops::Rope rope(16, 32, 10000.0, kCuda.device());
  const at::Tensor heads = at::randn({2, 16, 3, 32}, bf16), norm = at::rand({32}, kCuda) + 0.5;
  CHECK(at::equal(loom_ops::rope_heads(rope, heads, at::Tensor(), norm, 1e-6),
                  loom_ops::cuda::rope_heads(rope, heads, at::Tensor(), norm, 1e-6)));
  const at::Tensor order = at::randperm(128, kCuda.dtype(at::kLong)), top = at::rand({64, 2}, bf16);
  CHECK(at::equal(loom_ops::moe_permute(x, order, 2), loom_ops::cuda::moe_permute(x, order, 2)));
  const at::Tensor expert_rows = at::randn({128, 96}, bf16);
  CHECK(at::equal(loom_ops::moe_combine(expert_rows, order, top), loom_ops::cuda::moe_combine(expert_rows, order, top)));
  // autocast's bfloat16 expert rows beside float32 router weights: the kernel on the rows widened,
  // within float32's rounding of the reference (whose sums run in another order), its output float32.
  const at::Tensor top32 = at::rand({64, 2}, kCuda);
  const at::Tensor mixed = loom_ops::moe_combine(expert_rows, order, top32);
  CHECK((mixed.scalar_type() == at::kFloat));
  CHECK(at::equal(mixed, loom_ops::cuda::moe_combine(expert_rows.to(at::kFloat), order, top32)));
  CHECK(largest_error(mixed, loom_ops::reference::moe_combine(expert_rows, order, top32)) < 1e-5);
  const at::Tensor targets = at::randint(0, 96, {64}, kCuda.dtype(at::kLong));
  at::Tensor logits_a = x.clone(), logits_b = x.clone();
  CHECK(at::equal(loom_ops::cross_entropy_rows(logits_a, targets, -100, true),
                  loom_ops::cuda::cross_entropy_rows(logits_b, targets, -100, true)));
  CHECK(at::equal(logits_a, logits_b));  // the gradient written over the logits
  // autocast's float32 residual beside a bfloat16 branch: the kernel too.
  CHECK(at::equal(loom_ops::add_rms_norm(x32, d, w32, 1e-6).second, loom_ops::cuda::add_rms_norm(x32, d, w32, 1e-6).second));
  // Not taken: a float32 branch beside a bfloat16 residual (the sum would widen) and a double
  // take the reference, bit for bit.
  CHECK(at::equal(loom_ops::add_rms_norm(x, x32, w, 1e-6).second, loom_ops::reference::add_rms_norm(x, x32, w, 1e-6).second));
  const at::Tensor x64 = x.to(at::kDouble);
  CHECK(at::equal(loom_ops::swiglu(x64, x64), loom_ops::reference::swiglu(x64, x64)));
  loom_ops::cuda::use_kernels(false);
  CHECK_FALSE(loom_ops::cuda_kernels_in_use());
  CHECK(at::equal(loom_ops::gelu_tanh(x), at::gelu(x, "tanh")));
}

int main(int argc, char** argv) {
  const int gpus = at::hasCUDA() ? at::detail::getCUDAHooks().getNumGPUs() : 0;
  if (gpus == 0) {
    std::printf("ops_gpu_tests skipped: %s\n", at::hasCUDA() ? "no GPU is visible to LibTorch"
                                                               : "LibTorch reports no CUDA (a CPU-only build, or no CUDA driver here)");
    return 77;  // SKIP_RETURN_CODE in tests/ops/CMakeLists.txt
  }
  doctest::Context context(argc, argv);
  return context.run();
}
