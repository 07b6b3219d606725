// synth_truth.hpp: the ground truth of loom-ctr-synth, a logistic model over Criteo-shaped rows.
//
//   logit = bias + sum_d a_d * g(x_d) + sum_f mean_{v in cell f} w[f][v]
//   g(x) = log(1 + x) for x > 0, else 0 (what the criteo_tsv dataset feeds a model)
//   label ~ Bernoulli(sigmoid(logit))
// Dense x_d: geometric counts with a mean in [1, 20) per feature, empty with probability
// `missing` (g = 0); a_d ~ Normal(0, 0.3 * sqrt(13 / dense)). Categorical feature f: `vocab`
// entries, each a distinct random 32-bit hex id and a weight w[f][v] ~ Normal(0, sigma_sparse);
// entries drawn Zipf-like (P(rank k) ~ k^-1.1); an empty cell (probability `missing`) adds 0;
// the last `multi_hot` features hold 1 to 3 entries each and add the mean of their weights.
// The bias makes the expected positive rate 0.25 (found on a calibration sample).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "synth_rng.hpp"

namespace ctr_synth {

struct Shape {
  int64_t dense = 13, sparse = 26, vocab = 200, multi_hot = 2;
  double missing = 0.05;
};

inline constexpr double kZipfExponent = 1.1;
inline constexpr double kTargetPositiveRate = 0.25;

struct Truth {
  Shape shape;
  double sigma_sparse = 0, sigma_dense = 0, bias = 0;
  std::vector<double> dense_weight, dense_p;   // a_d and the geometric parameter of feature d
  std::vector<std::vector<uint32_t>> ids;      // [f][v]: the hex id of entry v
  std::vector<std::vector<double>> weights;    // [f][v]: w[f][v]
  std::vector<double> zipf_cdf;                // over entry ranks 0 .. vocab - 1
};

Truth make_truth(const Shape& shape, uint64_t seed);

// Draws one row: appends its dense and categorical columns (tab-separated, no label, no
// newline) to `columns` and returns its logit without the bias.
double draw_row(const Truth& truth, Rng& rng, std::string& columns);

double sigmoid(double z);

}  // namespace ctr_synth
