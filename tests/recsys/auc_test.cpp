// exact_roc_auc against the definition: the fraction of (positive, negative) pairs in which the
// positive scores higher, ties counting one half, counted pair by pair.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "train/exact_auc.hpp"

namespace {

double pairwise_auc(const at::Tensor& pairs) {
  const at::Tensor p = pairs.to(at::kDouble).contiguous();
  const double* d = p.data_ptr<double>();
  double wins = 0, count = 0;
  for (int64_t i = 0; i < p.size(0); ++i)
    for (int64_t j = 0; j < p.size(0); ++j)
      if (d[2 * i + 1] != 0 && d[2 * j + 1] == 0) {
        wins += d[2 * i] > d[2 * j] ? 1.0 : d[2 * i] == d[2 * j] ? 0.5 : 0.0;
        count += 1;
      }
  return wins / count;
}

}  // namespace

TEST_CASE("exact AUC equals the pairwise definition, with many tied scores") {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (int trial = 0; trial < 5; ++trial) {
    const int64_t n = 300 + 50 * trial;
    // Scores rounded to a few levels make ties common; labels depend on the score.
    const at::Tensor score = at::round(at::rand({n}, gen) * (trial + 3)) / (trial + 3);
    const at::Tensor label = at::lt(at::rand({n}, gen), score * 0.6 + 0.2).to(at::kFloat);
    const at::Tensor pairs = at::stack({score, label}, 1);
    CHECK(loom::exact_roc_auc(pairs) == doctest::Approx(pairwise_auc(pairs)).epsilon(1e-12));
  }
}

TEST_CASE("exact AUC: perfect, reversed, constant scores, and one class only") {
  const at::Tensor perfect = at::tensor({0.1, 0.0, 0.2, 0.0, 0.8, 1.0, 0.9, 1.0}, at::kDouble).reshape({4, 2});
  CHECK(loom::exact_roc_auc(perfect) == 1.0);
  const at::Tensor reversed = at::tensor({0.9, 0.0, 0.1, 1.0}, at::kDouble).reshape({2, 2});
  CHECK(loom::exact_roc_auc(reversed) == 0.0);
  const at::Tensor constant = at::tensor({0.5, 0.0, 0.5, 1.0, 0.5, 1.0}, at::kDouble).reshape({3, 2});
  CHECK(loom::exact_roc_auc(constant) == 0.5);
  const at::Tensor positives = at::tensor({0.5, 1.0, 0.7, 1.0}, at::kDouble).reshape({2, 2});
  CHECK(std::isnan(loom::exact_roc_auc(positives)));
}
