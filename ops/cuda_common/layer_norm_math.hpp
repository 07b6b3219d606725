// layer_norm_math.hpp: the arithmetic of LayerNorm that the fused ops' CPU loops and CUDA
// kernels share (add_layer_norm), so that the CPU tests hold the GPU's formulas to the
// reference too. fp32; no ATen and no CUDA header.
#pragma once

#include <math.h>

#include <cstdint>

#include "host_device.hpp"

namespace loom_ops::layer_norm_math {

// 1 / sqrt(var + eps) for a row of d elements whose squared deviations from the mean sum to
// `deviations` (the biased variance, as LayerNorm's).
LOOM_OPS_HOST_DEVICE inline float inverse_std(float deviations, int64_t d, float eps) {
  return 1.0f / sqrtf(deviations / static_cast<float>(d) + eps);
}

// The gradient reaching s_i through xhat = (s - mean) rstd, with g_i = dy_i w_i the gradient of
// xhat_i, g_sum the row's sum of g and gx_sum its sum of g_j xhat_j:
// rstd (g_i - g_sum / d - xhat_i gx_sum / d).
LOOM_OPS_HOST_DEVICE inline float normalised_grad(float g, float xhat, float rstd, float g_sum, float gx_sum,
                                                  int64_t d) {
  const float n = static_cast<float>(d);  // the divisions are loop-invariant: compilers hoist them
  return rstd * (g - g_sum / n - xhat * (gx_sum / n));
}

}  // namespace loom_ops::layer_norm_math
