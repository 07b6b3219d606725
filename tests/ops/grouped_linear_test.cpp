// grouped_linear_test.cpp: the experts' grouped products (ops/grouped_linear/) against one
// at::linear per expert in double, forward and backward, an expert with no rows among them;
// tokens_per_expert against at::bincount; arguments it cannot take refused by name.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <loom_ops/grouped_linear.hpp>

#include <stdexcept>
#include <vector>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

TEST_CASE("grouped expert products equal one product per expert in double, forward and backward") {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor counts = at::tensor({5, 0, 9, 1, 7}, at::kLong);  // an expert with no rows
  const int64_t rows = counts.sum().item<int64_t>(), in = 24, out = 40;
  const at::Tensor x64 = at::randn({rows, in}, gen, at::kDouble);
  std::vector<at::Tensor> w64, w32;
  for (int64_t e = 0; e < counts.size(0); ++e) {
    w64.push_back(at::randn({out, in}, gen, at::kDouble).requires_grad_());
    w32.push_back(w64.back().detach().to(at::kFloat).requires_grad_());
  }
  const at::Tensor x32 = x64.to(at::kFloat).requires_grad_();
  const at::Tensor x64g = x64.clone().requires_grad_();
  const at::Tensor grouped = loom_ops::grouped_linear(x32, w32, counts);  // at::_grouped_mm
  std::vector<at::Tensor> per_expert;
  for (int64_t e = 0, start = 0; e < counts.size(0); start += counts[e].item<int64_t>(), ++e)
    per_expert.push_back(at::linear(x64g.narrow(0, start, counts[e].item<int64_t>()), w64[static_cast<size_t>(e)]));
  const at::Tensor reference = at::cat(per_expert);
  CHECK(largest_error(loom_ops::reference::grouped_linear(x64, w64, counts), reference.detach()) == 0.0);
  CHECK(largest_error(grouped, reference) < 1e-6);
  const at::Tensor up = at::randn({rows, out}, gen, at::kDouble);
  grouped.backward(up.to(at::kFloat));
  reference.backward(up);
  CHECK(largest_error(x32.grad(), x64g.grad()) < 1e-6);
  for (size_t e = 0; e < w64.size(); ++e) {
    CAPTURE(e);
    if (counts[static_cast<int64_t>(e)].item<int64_t>() == 0) {
      CHECK(w32[e].grad().abs().max().item<double>() == 0.0);
      continue;
    }
    CHECK(largest_error(w32[e].grad(), w64[e].grad()) < 1e-6);
  }
  // The double path (one product per expert on the sorted rows) is the reference itself.
  CHECK(largest_error(loom_ops::grouped_linear(x64, w64, counts), reference.detach()) < 1e-12);
}

TEST_CASE("tokens per expert: at::bincount's counts, experts nobody chose included") {
  const at::Tensor chosen = at::tensor({3, 0, 3, 5, 0, 3}, at::kLong).view({3, 2});
  CHECK(at::equal(loom_ops::tokens_per_expert(chosen, 7), at::bincount(chosen.reshape({-1}), {}, 7)));
}

TEST_CASE("grouped products refuse arguments they cannot take") {
  const at::Tensor rows = at::randn({4, 8});
  const std::vector<at::Tensor> weights{at::randn({5, 8}), at::randn({5, 8})};
  CHECK_THROWS_AS(loom_ops::grouped_linear(rows, weights, at::tensor({4}, at::kLong)), std::invalid_argument);
  CHECK_THROWS_AS(loom_ops::grouped_linear(rows, {at::randn({5, 7}), at::randn({5, 7})}, at::tensor({2, 2}, at::kLong)),
                  std::invalid_argument);
  CHECK_THROWS_AS(loom_ops::grouped_linear(rows, weights, at::tensor({2, 2}, at::kInt)), std::invalid_argument);
}
