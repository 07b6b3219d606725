// cross_entropy_rows_math.hpp: the arithmetic of a row's softmax cross-entropy that both the CPU
// loops (cross_entropy_rows_cpu.cpp) and the CUDA kernel (cross_entropy_rows.cu) run, so that
// the CPU tests hold the GPU's formulas to the reference too. fp32; expf and logf are the
// caller's (libmvec's vector exp on the CPU, CUDA's on the GPU).
#pragma once

#include <math.h>

#include "../cuda_common/host_device.hpp"

namespace loom_ops::cross_entropy_rows_math {

// Some of a row's values summarised as their maximum and the sum of exp(value - maximum):
// enough to merge two parts (the online softmax of Milakov and Gimelshein, arXiv:1805.02867)
// and to give the row's log-sum-exp. None yet: {-inf, 0}.
struct MaxSum {
  float max;
  float sum;
};

// The summary of both parts. A part with nothing in it (sum 0) leaves the other as it is; a NaN
// maximum stays in the result (the comparison is false for it, and the scaled sum is NaN).
LOOM_OPS_HOST_DEVICE inline MaxSum merge(MaxSum a, MaxSum b) {
  if (b.sum == 0.0f) return a;
  if (a.sum == 0.0f) return b;
  if (a.max < b.max) {
    const MaxSum t = a;
    a = b;
    b = t;
  }
  return {a.max, a.sum + b.sum * expf(b.max - a.max)};
}

// One more value. -inf adds nothing (a row of -inf and finite values is the finite values'); a
// NaN or +inf makes the sum NaN, as the composition's log_softmax does.
LOOM_OPS_HOST_DEVICE inline MaxSum add(MaxSum a, float x) {
  if (x == -INFINITY) return a;
  if (x == INFINITY) return {x, x - x};  // inf - inf: NaN
  if (a.sum == 0.0f) return {x, 1.0f};
  if (x > a.max) return {x, a.sum * expf(a.max - x) + 1.0f};
  return {a.max, a.sum + expf(x - a.max)};
}

// log p of a value x of the row summarised by s: (x - max) - log(sum), in log_softmax's order.
// x - max is exact for the values that matter (those near the maximum), so no bits go to the
// maximum's magnitude, as they would in x - (max + log(sum)): a logit of 1e4 has an ulp of 1e-3.
// A row of -inf only, or with +inf or NaN, gives NaN.
LOOM_OPS_HOST_DEVICE inline float log_probability(float x, MaxSum s) { return (x - s.max) - logf(s.sum); }

// The loss's gradient at a value x of the row: softmax - one_hot(target), in fp32, rounded once
// by the caller. log_sum: logf(s.sum), taken once a row.
LOOM_OPS_HOST_DEVICE inline float gradient(float x, float max, float log_sum, bool is_target) {
  return expf((x - max) - log_sum) - (is_target ? 1.0f : 0.0f);
}

}  // namespace loom_ops::cross_entropy_rows_math
