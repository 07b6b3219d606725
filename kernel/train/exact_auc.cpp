#include "train/exact_auc.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace loom {

double exact_roc_auc(const at::Tensor& pairs) {
  const at::Tensor p = pairs.to(at::kCPU, at::kDouble).contiguous();
  const int64_t n = p.size(0);
  const double* data = p.data_ptr<double>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return data[2 * a] < data[2 * b]; });
  // Sum of the (1-based, tie-averaged) ranks of the positives.
  double positive_rank_sum = 0, positives = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && data[2 * order[j]] == data[2 * order[i]]) ++j;
    const double mid_rank = 0.5 * static_cast<double>(i + 1 + j);  // mean of ranks i+1 .. j
    for (int64_t k = i; k < j; ++k)
      if (data[2 * order[k] + 1] != 0) {
        positive_rank_sum += mid_rank;
        positives += 1;
      }
    i = j;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  return (positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

}  // namespace loom
