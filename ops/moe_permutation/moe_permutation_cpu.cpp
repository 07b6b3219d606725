#include "moe_permutation_cpu.hpp"

#include <cstring>

#include "../cpu_common/lane_sum.hpp"
#include "moe_permutation_math.hpp"

namespace loom_ops::cpu {

using moe_permutation_math::kMaxChoices;

void moe_gather_rows(const float* x, const int64_t* order, int64_t k, int64_t C, float* rows, int64_t begin,
                     int64_t end) {
  for (int64_t i = begin; i < end; ++i)
    std::memcpy(rows + i * C, x + order[i] / k * C, static_cast<size_t>(C) * sizeof(float));
}

void moe_sum_rows(const float* rows, const int64_t* inverse, const float* weight, int64_t k, int64_t C, float* out,
                  int64_t begin, int64_t end) {
  int64_t position[kMaxChoices], pair[kMaxChoices];
  for (int64_t n = begin; n < end; ++n) {
    moe_permutation_math::token_positions(inverse, n, static_cast<int>(k), position, pair);
    float* __restrict o = out + n * C;
    // The composition starts from zeros: 0 + a is a, so the first row is written, not added.
    for (int64_t j = 0; j < k; ++j) {
      const float* __restrict r = rows + position[j] * C;
      const float w = weight ? weight[pair[j]] : 1.0f;
      if (j == 0 && weight) {
        for (int64_t c = 0; c < C; ++c) o[c] = r[c] * w;
      } else if (j == 0) {
        std::memcpy(o, r, static_cast<size_t>(C) * sizeof(float));
      } else if (weight) {
        for (int64_t c = 0; c < C; ++c) o[c] += r[c] * w;
      } else {
        for (int64_t c = 0; c < C; ++c) o[c] += r[c];
      }
    }
  }
}

void moe_combine_backward(const float* dout, const float* rows, const int64_t* order, const float* top, int64_t k,
                          int64_t C, float* drows, float* dtop, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t p = order[i];
    const float* __restrict g = dout + p / k * C;
    const float* __restrict r = rows + i * C;
    float* __restrict dr = drows + i * C;
    const float w = top[p];
    for (int64_t c = 0; c < C; ++c) dr[c] = g[c] * w;
    dtop[p] = lane_sum(C, [&](int64_t c) { return g[c] * r[c]; });
  }
}

}  // namespace loom_ops::cpu
