#include "add_layer_norm_cpu.hpp"

#include "../cpu_common/lane_sum.hpp"
#include "../cpu_common/vector_exp.hpp"  // LOOM_OPS_CPU_CLONES
#include "../cuda_common/layer_norm_math.hpp"

namespace loom_ops::cpu {

LOOM_OPS_CPU_CLONES void add_layer_norm_forward(const float* x, const float* delta, const float* w, const float* b,
                                                float* s, float* y, float* mean, float* rstd, int64_t begin,
                                                int64_t end, int64_t d, float eps) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * d;
    float* sr = s + base;
    for (int64_t j = 0; j < d; ++j) sr[j] = x[base + j] + delta[base + j];
    const float m = lane_sum(d, [&](int64_t j) { return sr[j]; }) / static_cast<float>(d);
    // Two passes, not E[s^2] - m^2: no cancellation.
    const float deviations = lane_sum(d, [&](int64_t j) { return (sr[j] - m) * (sr[j] - m); });
    const float r = layer_norm_math::inverse_std(deviations, d, eps);
    mean[row] = m;
    rstd[row] = r;
    float* yr = y + base;
    if (b)
      for (int64_t j = 0; j < d; ++j) yr[j] = (sr[j] - m) * r * w[j] + b[j];
    else
      for (int64_t j = 0; j < d; ++j) yr[j] = (sr[j] - m) * r * w[j];
  }
}

LOOM_OPS_CPU_CLONES void add_layer_norm_backward(const float* dy, const float* ds_in, const float* s, const float* w,
                                                 const float* mean, const float* rstd, float* ds, float* dw_sum,
                                                 float* db_sum, int64_t begin, int64_t end, int64_t d) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * d;
    const float m = mean[row], r = rstd[row];
    const float *g = dy + base, *sr = s + base;
    const float g_sum = lane_sum(d, [&](int64_t j) { return g[j] * w[j]; });
    const float gx_sum = lane_sum(d, [&](int64_t j) { return g[j] * w[j] * ((sr[j] - m) * r); });
    if (dw_sum) {
      for (int64_t j = 0; j < d; ++j) {
        dw_sum[j] += g[j] * ((sr[j] - m) * r);
        db_sum[j] += g[j];
      }
    }
    float* out = ds + base;
    const auto grad = [&](int64_t j) {
      return layer_norm_math::normalised_grad(g[j] * w[j], (sr[j] - m) * r, r, g_sum, gx_sum, d);
    };
    if (ds_in)  // two loops, so that neither tests ds_in per element and both vectorize
      for (int64_t j = 0; j < d; ++j) out[j] = ds_in[base + j] + grad(j);
    else
      for (int64_t j = 0; j < d; ++j) out[j] = grad(j);
  }
}

}  // namespace loom_ops::cpu
