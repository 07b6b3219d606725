// swiglu_math.hpp: the arithmetic of SwiGLU, silu(g) u, that both the CPU loops (swiglu_cpu.cpp)
// and the CUDA kernels (swiglu.cu) run, so that the CPU tests hold the GPU's formulas to the
// reference too. fp32; expf is the caller's (libmvec's vector exp on the CPU, CUDA's on the GPU).
#pragma once

#include <math.h>

#include "../cuda_common/host_device.hpp"

namespace loom_ops::swiglu_math {

// sigmoid(g) = 1 / (1 + exp(-g)): 0 for g = -inf (exp overflows to inf), 1 for g = inf.
LOOM_OPS_HOST_DEVICE inline float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// d silu(g) / dg with s = sigmoid(g): s + g s (1 - s) = s (1 + g (1 - s)).
LOOM_OPS_HOST_DEVICE inline float silu_slope(float g, float s) { return s * (1.0f + g * (1.0f - s)); }

}  // namespace loom_ops::swiglu_math
