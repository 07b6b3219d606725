#include "gelu_tanh_cpu.hpp"

#include <cmath>

// glibc's vector math library (libmvec) has expf for 4 (SSE2) and 8 (AVX2) floats at a time;
// glibc's own header announces them only under -ffast-math, whose approximate division turns
// exp's overflow to infinity into NaN. This declaration announces them without it.
#if defined(__GLIBC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
extern "C" float expf(float) noexcept __attribute__((simd("notinbranch")));
#define LOOM_GELU_EXP expf
#else
#define LOOM_GELU_EXP std::exp
#endif

namespace loom_ops::cpu {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;  // Hendrycks & Gimpel, arXiv:1606.08415, the tanh approximation
}  // namespace

// One clone per instruction set, picked when the plugin loads (GCC ifunc): AVX2 where the CPU
// has it, SSE2 everywhere else.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LOOM_GELU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOOM_GELU_CLONES
#endif

LOOM_GELU_CLONES void gelu_tanh_forward(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + LOOM_GELU_EXP(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

LOOM_GELU_CLONES void gelu_tanh_backward(const float* __restrict dy, const float* __restrict x, float* __restrict dx,
                                         int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = 1.0f / (1.0f + LOOM_GELU_EXP(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
    dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v));
  }
}

}  // namespace loom_ops::cpu
