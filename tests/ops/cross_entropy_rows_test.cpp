// The softmax cross-entropy rows (ops/cross_entropy_rows/) against the composition in double:
// each row's loss and the gradient written over the logits, across rows long enough to be split
// into pieces (4096 values) and with partial last pieces; ignored rows; the extremes (-inf, +inf
// and NaN logits, pieces of -inf only, large offsets), each as the composition gives it; what
// goes to the reference and what is refused.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/cross_entropy_rows.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

namespace {

constexpr int64_t kIgnore = -100;

struct Result {
  at::Tensor loss, gradient;
};

Result run(decltype(&loom_ops::cross_entropy_rows) op, const at::Tensor& logits, const at::Tensor& targets) {
  const at::Tensor written = logits.clone();
  const at::Tensor loss = op(written, targets, kIgnore, true);
  return {loss, written};
}

at::Tensor targets_for(int64_t n, int64_t V) {
  at::Tensor t = at::randint(0, V, {n}, at::kLong);
  t.index_put_({at::arange(0, n, 7)}, kIgnore);  // every seventh row carries no loss
  return t;
}

}  // namespace

TEST_CASE("cross_entropy_rows: each row's loss and the gradient written over it, as close to double as the composition") {
  at::manual_seed(31);
  for (const int64_t V : {1, 7, 4096, 4099, 50257}) {
    CAPTURE(V);
    const int64_t n = V > 10000 ? 20 : 60;
    const at::Tensor logits = at::randn({n, V}) * 4 + 30, targets = targets_for(n, V);
    const Result fused = run(loom_ops::cross_entropy_rows, logits, targets);
    const Result composed = run(loom_ops::reference::cross_entropy_rows, logits, targets);
    const Result exact = run(loom_ops::reference::cross_entropy_rows, logits.to(at::kDouble), targets);
    CHECK((fused.loss.scalar_type() == at::kFloat));
    const double loss_error = largest_error(fused.loss, exact.loss), grad_error = largest_error(fused.gradient, exact.gradient);
    MESSAGE("V " << V << ": loss " << loss_error << " (composition " << largest_error(composed.loss, exact.loss)
                 << "), gradient " << grad_error << " (composition " << largest_error(composed.gradient, exact.gradient) << ")");
    CHECK(loss_error < 1e-6);
    CHECK(grad_error < 1e-6);
    const at::Tensor ignored = targets.eq(kIgnore);
    CHECK(fused.loss.masked_select(ignored).abs().max().item<float>() == 0.0f);
    CHECK(fused.gradient.index({ignored}).abs().max().item<float>() == 0.0f);
    // Without the gradient the logits are left as they were.
    const at::Tensor kept = logits.clone();
    CHECK(at::equal(loom_ops::cross_entropy_rows(kept, targets, kIgnore, false), fused.loss));
    CHECK(at::equal(kept, logits));
  }
}

TEST_CASE("cross_entropy_rows: infinities, NaN and pieces of -inf only, as the composition") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t V = 9000;  // three pieces of 4096, 4096 and 808 values
  at::manual_seed(32);
  at::Tensor logits = at::randn({7, V});
  logits[0].narrow(0, 0, 4096).fill_(-inf);  // a first piece of -inf only: the row is its other values'
  logits[1].narrow(0, 100, 50).fill_(-inf);  // scattered -inf
  logits[2].fill_(-inf);                     // nothing but -inf: NaN
  logits[3][5000] = inf;                     // +inf: NaN
  logits[4][17] = nan;                       // NaN in a finite piece
  logits[5].narrow(0, 0, 4096).fill_(-inf);  // NaN in a piece otherwise -inf
  logits[5][3] = nan;
  logits[6] += 1e4f;                         // far from 0: the maximum taken out first
  const at::Tensor targets = at::tensor({5000, 5000, 5000, 0, 0, 5000, 1234}, at::kLong);
  const Result fused = run(loom_ops::cross_entropy_rows, logits, targets);
  const Result composed = run(loom_ops::reference::cross_entropy_rows, logits, targets);
  for (int64_t r = 0; r < 7; ++r) {
    CAPTURE(r);
    const bool nan_row = std::isnan(composed.loss[r].item<float>());
    CHECK(std::isnan(fused.loss[r].item<float>()) == nan_row);
    CHECK(fused.gradient[r].isnan().any().item<bool>() == composed.gradient[r].isnan().any().item<bool>());
    if (nan_row) continue;
    const double want = composed.loss[r].item<double>();
    CHECK(std::abs(fused.loss[r].item<double>() - want) < 1e-6 * std::abs(want) + 1e-6);
    CHECK(largest_error(fused.gradient[r], composed.gradient[r]) < 1e-6);
  }
  CHECK((fused.gradient[0].narrow(0, 0, 4096) == 0).all().item<bool>());  // exp(-inf) is 0
}

TEST_CASE("cross_entropy_rows: other dtypes go to the reference; bad targets and shapes are refused") {
  at::manual_seed(33);
  const at::Tensor logits = at::randn({5, 300}).to(at::kBFloat16), targets = at::tensor(std::vector<int64_t>{1, 2, kIgnore, 299, 0});
  const Result fused = run(loom_ops::cross_entropy_rows, logits, targets);
  const Result composed = run(loom_ops::reference::cross_entropy_rows, logits, targets);
  CHECK(at::equal(fused.loss, composed.loss));
  CHECK(at::equal(fused.gradient, composed.gradient));
  const at::Tensor x = at::randn({3, 10});
  const auto rows = [](const at::Tensor& logits, const at::Tensor& targets) {
    loom_ops::cross_entropy_rows(logits, targets, kIgnore, true);
  };
  CHECK_THROWS_WITH_AS(rows(x, at::tensor({1, 10, 2}, at::kLong)),
                       doctest::Contains("cross_entropy_rows: target 10 of row 1 is outside [0, 10)"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(rows(x, at::tensor({1, -1, 2}, at::kLong)), doctest::Contains("target -1 of row 1"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(rows(x, at::tensor({1, 2, 3}, at::kInt)), doctest::Contains("targets must be (3) int64"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(rows(x.t(), at::tensor({1, 2, 3}, at::kLong)), doctest::Contains("not contiguous"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(rows(x.reshape({-1}), at::tensor({1}, at::kLong)), doctest::Contains("logits must be (n, V)"),
                       std::invalid_argument);
}
