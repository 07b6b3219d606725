#include "rope_heads_cpu.hpp"

#include "../cuda_common/rms_norm_math.hpp"
#include "rope_heads_math.hpp"

namespace loom_ops::cpu {

using rope_heads_math::Pair;

void rope_heads_forward(const RopeHeadsArgs& a, float* y, float* inverse_rms, int64_t begin, int64_t end) {
  const int64_t D = a.D, half = D / 2;
  for (int64_t row = begin; row < end; ++row) {
    const float* x = a.x + row * D;
    const rope_heads_math::RowPlace place = rope_heads_math::place_of(row, a.T, a.H);
    const int64_t pos = a.positions ? a.positions[place.b * a.T + place.t] : place.t;
    const float *c = a.cos + pos * D, *s = a.sin + pos * D;
    float* out = y + place.out_row * D;
    float r = 1.0f;
    if (a.w) {
      float squares = 0;
      for (int64_t j = 0; j < D; ++j) squares += x[j] * x[j];
      r = rms_norm_math::inverse_rms(squares, D, a.eps);
      inverse_rms[row] = r;
    }
    const auto normed = [&](int64_t j) { return a.w ? x[j] * r * a.w[j] : x[j]; };
    for (int64_t j = 0; j < half; ++j) {
      const Pair rotated = rope_heads_math::rotate({normed(j), normed(j + half)}, {c[j], c[j + half]}, {s[j], s[j + half]});
      out[j] = rotated.lo;
      out[j + half] = rotated.hi;
    }
  }
}

void rope_heads_backward(const RopeHeadsArgs& a, const float* inverse_rms, const float* dy, float* dx, float* dw_sum,
                         int64_t begin, int64_t end) {
  const int64_t D = a.D, half = D / 2;
  for (int64_t row = begin; row < end; ++row) {
    const rope_heads_math::RowPlace place = rope_heads_math::place_of(row, a.T, a.H);
    const int64_t pos = a.positions ? a.positions[place.b * a.T + place.t] : place.t;
    const float *c = a.cos + pos * D, *s = a.sin + pos * D, *g = dy + place.out_row * D;
    float* d = dx + row * D;  // first the gradient of the normalised row, then (with a norm) of x
    for (int64_t j = 0; j < half; ++j) {
      const Pair back = rope_heads_math::rotate_back({g[j], g[j + half]}, {c[j], c[j + half]}, {s[j], s[j + half]});
      d[j] = back.lo;
      d[j + half] = back.hi;
    }
    if (!a.w) continue;
    const float* x = a.x + row * D;
    const float r = inverse_rms[row];
    float dot = 0;
    for (int64_t j = 0; j < D; ++j) {
      dot += d[j] * a.w[j] * x[j];
      dw_sum[j] += d[j] * x[j] * r;
    }
    for (int64_t j = 0; j < D; ++j) d[j] = rms_norm_math::normalised_grad(d[j] * a.w[j], x[j], r, dot, D);
  }
}

}  // namespace loom_ops::cpu
