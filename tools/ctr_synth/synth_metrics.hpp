// synth_metrics.hpp: exact AUC and log loss of scores against 0/1 labels, for truth.json.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

namespace ctr_synth {

// Mann-Whitney AUC: the share of (positive, negative) pairs the scores order correctly, a tie
// counting one half. Counted in integers (twice the pairs) over the rows sorted by score, so the
// result is exact up to the final division. nullopt when either class is absent.
inline std::optional<double> exact_auc(const std::vector<double>& scores, const std::vector<uint8_t>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  uint64_t twice_pairs = 0, negatives_below = 0, positives = 0, negatives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    uint64_t pos = 0, neg = 0;
    for (; j < order.size() && scores[order[j]] == scores[order[i]]; ++j) (labels[order[j]] ? pos : neg) += 1;
    twice_pairs += pos * (2 * negatives_below + neg);
    negatives_below += neg;
    positives += pos;
    negatives += neg;
    i = j;
  }
  if (positives == 0 || negatives == 0) return std::nullopt;
  return double(twice_pairs) / (2.0 * double(positives) * double(negatives));
}

// Mean negative log-likelihood of the labels under probabilities p (kept 1e-15 from 0 and 1, so
// one saturated row cannot make it infinite).
inline double log_loss(const std::vector<double>& p, const std::vector<uint8_t>& labels) {
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(p[i], 1e-15, 1 - 1e-15);
    total -= labels[i] ? std::log(q) : std::log1p(-q);
  }
  return p.empty() ? 0 : total / double(p.size());
}

}  // namespace ctr_synth
