// gelu_tanh_cpu.hpp: the CPU element loops behind gelu_tanh.cpp, in a file of their own because
// they are compiled to call glibc's vector exp (libmvec, -fno-math-errno).
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

// y[i] = x[i] / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
void gelu_tanh_forward(const float* x, float* y, int64_t n);
// dx[i] = dy[i] (s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)), s = 1 / (1 + exp(-2u))
void gelu_tanh_backward(const float* dy, const float* x, float* dx, int64_t n);

}  // namespace loom_ops::cpu
