#include "add_rms_norm_cpu.hpp"

#include "../cuda_common/rms_norm_math.hpp"

namespace loom_ops::cpu {

using rms_norm_math::inverse_rms;
using rms_norm_math::normalised_grad;

void add_rms_norm_forward(const float* x, const float* delta, const float* w, float* s, float* y, float* inverse,
                          int64_t begin, int64_t end, int64_t d, float eps) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * d;
    float squares = 0;
    if (delta) {
      for (int64_t j = 0; j < d; ++j) {
        const float v = x[base + j] + delta[base + j];
        s[base + j] = v;
        squares += v * v;
      }
    } else {
      for (int64_t j = 0; j < d; ++j) squares += x[base + j] * x[base + j];
    }
    const float r = inverse_rms(squares, d, eps);
    inverse[row] = r;
    const float* normed = delta ? s : x;
    for (int64_t j = 0; j < d; ++j) y[base + j] = normed[base + j] * r * w[j];
  }
}

void add_rms_norm_backward(const float* dy, const float* ds_in, const float* s, const float* w,
                           const float* inverse, float* ds, float* dw_sum, int64_t begin, int64_t end, int64_t d) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * d;
    const float r = inverse[row];
    float dot = 0;
    for (int64_t j = 0; j < d; ++j) {
      dot += dy[base + j] * w[j] * s[base + j];
      dw_sum[j] += dy[base + j] * s[base + j] * r;
    }
    for (int64_t j = 0; j < d; ++j) {
      const float g = normalised_grad(dy[base + j] * w[j], s[base + j], r, dot, d);
      ds[base + j] = ds_in ? ds_in[base + j] + g : g;
    }
  }
}

}  // namespace loom_ops::cpu
