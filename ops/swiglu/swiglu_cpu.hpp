// swiglu_cpu.hpp: the CPU element loops behind swiglu.cpp, in a file of their own because they
// are compiled to call glibc's vector exp (libmvec, -fno-math-errno).
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

// y[i] = silu(g[i]) u[i]
void swiglu_forward(const float* g, const float* u, float* y, int64_t n);
// dg[i] = dy[i] u[i] silu'(g[i]), du[i] = dy[i] silu(g[i])
void swiglu_backward(const float* dy, const float* g, const float* u, float* dg, float* du, int64_t n);

}  // namespace loom_ops::cpu
