#include "cross_entropy_rows_cpu.hpp"

#include "../cpu_common/vector_exp.hpp"  // before the formulas: their expf is the vector one
#include "../cpu_common/lane_sum.hpp"
#include "cross_entropy_rows_math.hpp"

#include <algorithm>

namespace loom_ops::cpu {
namespace {

using cross_entropy_rows_math::MaxSum;

// Values per piece of a row: 16 KiB of fp32, so the sum's pass reads the piece from L1/L2 right
// after the maximum's pass, and the row is read from memory once for its log-sum-exp.
constexpr int64_t kPiece = 4096;

// 8 lanes of running maxima, as lane_sum does for sums (a vector's worth of independent
// compares). A NaN is never the maximum (x > m is false for it); the sum after finds it.
LOOM_OPS_CPU_CLONES float lane_max(const float* __restrict x, int64_t n) {
  constexpr int kLanes = 8;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -INFINITY);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] = x[j + k] > lanes[k] ? x[j + k] : lanes[k];
  float m = -INFINITY;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  for (int k = 0; k < kLanes; ++k) m = lanes[k] > m ? lanes[k] : m;
  return m;
}

LOOM_OPS_CPU_CLONES float exp_sum(const float* __restrict x, int64_t n, float m) {
  return lane_sum(n, [&](int64_t j) { return expf(x[j] - m); });
}

// One piece's summary. A piece whose maximum is -inf holds only -inf and NaN: the value-by-value
// form sorts them out (exp(-inf - -inf) would be NaN for a row the reference finds finite).
MaxSum piece_summary(const float* x, int64_t n) {
  const float m = lane_max(x, n);
  if (m > -INFINITY) return {m, exp_sum(x, n, m)};
  MaxSum s{-INFINITY, 0.0f};
  for (int64_t j = 0; j < n; ++j) s = cross_entropy_rows_math::add(s, x[j]);
  return s;
}

LOOM_OPS_CPU_CLONES void write_softmax(float* __restrict x, int64_t n, float max, float log_sum) {
  for (int64_t j = 0; j < n; ++j) x[j] = expf((x[j] - max) - log_sum);
}

}  // namespace

float cross_entropy_row(float* x, int64_t n, int64_t target, bool write_gradient) {
  MaxSum row{-INFINITY, 0.0f};
  for (int64_t j = 0; j < n; j += kPiece)
    row = cross_entropy_rows_math::merge(row, piece_summary(x + j, std::min(kPiece, n - j)));
  const float picked = x[target], log_sum = logf(row.sum);
  if (write_gradient) {
    write_softmax(x, n, row.max, log_sum);
    x[target] = cross_entropy_rows_math::gradient(picked, row.max, log_sum, true);
  }
  return -cross_entropy_rows_math::log_probability(picked, row);
}

}  // namespace loom_ops::cpu
