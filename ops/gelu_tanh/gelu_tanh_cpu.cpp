#include "gelu_tanh_cpu.hpp"

#include "../cpu_common/vector_exp.hpp"

namespace loom_ops::cpu {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;  // Hendrycks & Gimpel, arXiv:1606.08415, the tanh approximation
}  // namespace

LOOM_OPS_CPU_CLONES void gelu_tanh_forward(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

LOOM_OPS_CPU_CLONES void gelu_tanh_backward(const float* __restrict dy, const float* __restrict x, float* __restrict dx,
                                            int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
    dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v));
  }
}

}  // namespace loom_ops::cpu
