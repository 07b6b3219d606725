// rms_norm_math.hpp: the arithmetic of RMSNorm that the fused ops' CPU loops and CUDA kernels
// share (add_rms_norm, rope_heads' per-head norm), so that the CPU tests hold the GPU's formulas
// to the reference too. fp32; no ATen and no CUDA header.
#pragma once

#include <math.h>

#include <cstdint>

#include "host_device.hpp"

namespace loom_ops::rms_norm_math {

// r = 1 / sqrt(mean(s^2) + eps) for a row of d elements whose squares sum to `squares`.
LOOM_OPS_HOST_DEVICE inline float inverse_rms(float squares, int64_t d, float eps) {
  return 1.0f / sqrtf(squares / static_cast<float>(d) + eps);
}

// The gradient reaching s_i through n = s r: with dn_i the gradient of n_i and dot the row's
// sum of dn_j s_j, d n_j / d s_i = r [i = j] - s_i s_j r^3 / d gives r dn_i - s_i r^3 dot / d.
LOOM_OPS_HOST_DEVICE inline float normalised_grad(float dn, float s, float r, float dot, int64_t d) {
  return r * dn - s * (r * r * r) * (dot / static_cast<float>(d));
}

}  // namespace loom_ops::rms_norm_math
