#include "swiglu_cpu.hpp"

#include "../cpu_common/vector_exp.hpp"  // before the formulas: their expf is the vector one
#include "swiglu_math.hpp"

namespace loom_ops::cpu {

using swiglu_math::sigmoid;
using swiglu_math::silu_slope;

LOOM_OPS_CPU_CLONES void swiglu_forward(const float* __restrict g, const float* __restrict u, float* __restrict y,
                                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] * sigmoid(g[i]) * u[i];
}

LOOM_OPS_CPU_CLONES void swiglu_backward(const float* __restrict dy, const float* __restrict g,
                                         const float* __restrict u, float* __restrict dg, float* __restrict du,
                                         int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(g[i]);
    du[i] = dy[i] * (g[i] * s);
    dg[i] = dy[i] * u[i] * silu_slope(g[i], s);
  }
}

}  // namespace loom_ops::cpu
