// add_rms_norm_cpu.hpp: the fused residual add + RMSNorm on contiguous fp32 rows of d elements,
// one pass over each row forward and two backward (cuda_common/rms_norm_math.hpp).
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

// Rows [begin, end): s = x + delta, r = 1 / sqrt(mean(s^2) + eps), y = (s r) w; inverse_rms[row] = r.
// delta null: the norm of x alone (rms_norm's CPU path), s neither written nor needed.
void add_rms_norm_forward(const float* x, const float* delta, const float* w, float* s, float* y, float* inverse_rms,
                          int64_t begin, int64_t end, int64_t d, float eps);

// Rows [begin, end): ds = ds_in (null: none) + the norm's gradient of dy; dw_sum (d floats)
// gains each row's dy (s r). For rms_norm, s is x and ds its gradient.
void add_rms_norm_backward(const float* dy, const float* ds_in, const float* s, const float* w,
                           const float* inverse_rms, float* ds, float* dw_sum, int64_t begin, int64_t end, int64_t d);

}  // namespace loom_ops::cpu
