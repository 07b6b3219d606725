// add_layer_norm_cpu.hpp: the fused residual add + LayerNorm on contiguous fp32 rows of d
// elements (cuda_common/layer_norm_math.hpp), one row at a time while it is in cache.
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

// Rows [begin, end): s = x + delta, mean, rstd = 1 / sqrt(var + eps), y = (s - mean) rstd w + b
// (b null: none); mean[row] and rstd[row] kept for backward.
void add_layer_norm_forward(const float* x, const float* delta, const float* w, const float* b, float* s, float* y,
                            float* mean, float* rstd, int64_t begin, int64_t end, int64_t d, float eps);

// Rows [begin, end): ds = ds_in (null: none) + the norm's gradient of dy; dw_sum and db_sum
// (d floats each) gain each row's dy xhat and dy (dw_sum null: neither is wanted).
void add_layer_norm_backward(const float* dy, const float* ds_in, const float* s, const float* w, const float* mean,
                             const float* rstd, float* ds, float* dw_sum, float* db_sum, int64_t begin, int64_t end,
                             int64_t d);

}  // namespace loom_ops::cpu
