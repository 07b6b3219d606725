// lane_sum.hpp: a row's sum in 8 independent lanes, added together at the end. A plain running
// sum is one chain of dependent adds (GCC may not reorder float adds without -ffast-math), so
// it runs at one add per latency; 8 lanes give the compiler a vector's worth of independent adds
// (one AVX register, or two SSE ones) and the row's pass runs at memory speed.
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

// The sum of term(j) for j in [0, n); the order of the adds is the lanes', not j's.
template <class Term>
inline float lane_sum(int64_t n, Term&& term) {
  constexpr int kLanes = 8;
  float lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] += term(j + k);
  float tail = 0;
  for (; j < n; ++j) tail += term(j);
  float total = tail;
  for (int k = 0; k < kLanes; ++k) total += lanes[k];
  return total;
}

}  // namespace loom_ops::cpu
