// synth_truth.cpp: the ground-truth model of loom-ctr-synth (synth_truth.hpp).
#include "synth_truth.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace ctr_synth {

namespace {

constexpr uint64_t kTruthStream = 0, kCalibrationStream = 1;
constexpr int kCalibrationRows = 65536;
constexpr double kSparseSpread = 1.1;  // sigma_sparse = this / sqrt(sparse): true eval AUC 0.79-0.83 at the defaults

void append_hex(std::string& out, uint32_t v) {
  static const char digits[] = "0123456789abcdef";
  for (int shift = 28; shift >= 0; shift -= 4) out.push_back(digits[(v >> shift) & 0xF]);
}

size_t zipf_entry(const Truth& t, Rng& rng) {
  const double u = rng.uniform();
  const auto it = std::upper_bound(t.zipf_cdf.begin(), t.zipf_cdf.end(), u);
  return std::min(size_t(it - t.zipf_cdf.begin()), t.zipf_cdf.size() - 1);
}

// The bias b with mean sigmoid(b + logit) = kTargetPositiveRate over the calibration rows.
double calibrate_bias(const Truth& t, uint64_t seed) {
  Rng rng(seed, kCalibrationStream);
  std::vector<double> logits(kCalibrationRows);
  std::string scratch;
  for (double& l : logits) {
    scratch.clear();
    l = draw_row(t, rng, scratch);
  }
  double lo = -40, hi = 40;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    double rate = 0;
    for (double l : logits) rate += sigmoid(mid + l);
    (rate / kCalibrationRows < kTargetPositiveRate ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }

Truth make_truth(const Shape& shape, uint64_t seed) {
  Truth t;
  t.shape = shape;
  Rng rng(seed, kTruthStream);
  t.sigma_dense = shape.dense > 0 ? 0.3 * std::sqrt(13.0 / double(shape.dense)) : 0;
  t.sigma_sparse = shape.sparse > 0 ? kSparseSpread / std::sqrt(double(shape.sparse)) : 0;
  for (int64_t d = 0; d < shape.dense; ++d) {
    t.dense_weight.push_back(rng.normal(t.sigma_dense));
    const double mean = std::exp(3.0 * rng.uniform());  // 1 to 20
    t.dense_p.push_back(1.0 / (1.0 + mean));
  }
  t.ids.resize(size_t(shape.sparse));
  t.weights.resize(size_t(shape.sparse));
  for (int64_t f = 0; f < shape.sparse; ++f) {
    std::unordered_set<uint32_t> seen;
    while (int64_t(t.ids[size_t(f)].size()) < shape.vocab) {
      const uint32_t id = uint32_t(rng.bits() >> 32);
      if (seen.insert(id).second) t.ids[size_t(f)].push_back(id);
    }
    for (int64_t v = 0; v < shape.vocab; ++v) t.weights[size_t(f)].push_back(rng.normal(t.sigma_sparse));
  }
  double total = 0;
  for (int64_t k = 1; k <= shape.vocab; ++k) t.zipf_cdf.push_back(total += std::pow(double(k), -kZipfExponent));
  for (double& c : t.zipf_cdf) c /= total;
  t.bias = calibrate_bias(t, seed);
  return t;
}

double draw_row(const Truth& t, Rng& rng, std::string& columns) {
  const Shape& s = t.shape;
  double logit = 0;
  for (int64_t d = 0; d < s.dense; ++d) {
    if (d > 0) columns.push_back('\t');
    if (rng.chance(s.missing)) continue;
    const uint64_t x = rng.geometric(t.dense_p[size_t(d)]);
    columns += std::to_string(x);
    if (x > 0) logit += t.dense_weight[size_t(d)] * std::log1p(double(x));
  }
  for (int64_t f = 0; f < s.sparse; ++f) {
    if (f > 0 || s.dense > 0) columns.push_back('\t');
    if (rng.chance(s.missing)) continue;
    const uint64_t count = f >= s.sparse - s.multi_hot ? 1 + rng.below(3) : 1;
    double sum = 0;
    for (uint64_t i = 0; i < count; ++i) {
      const size_t v = zipf_entry(t, rng);
      if (i > 0) columns.push_back(',');
      append_hex(columns, t.ids[size_t(f)][v]);
      sum += t.weights[size_t(f)][v];
    }
    logit += sum / double(count);
  }
  return logit;
}

}  // namespace ctr_synth
