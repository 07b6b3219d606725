// rope_heads_math.hpp: the rotation of one channel pair (j, j + D/2) in Hugging Face's
// rotate_half layout, forward and its transpose, that the CPU loops (rope_heads_cpu.cpp) and the
// CUDA kernels (rope_heads.cu) share. fp32; no ATen and no CUDA header.
//   y = x cos + rotate_half(x) sin,  rotate_half(x) = (-x_hi, x_lo)
#pragma once

#include <cstdint>

#include "../cuda_common/host_device.hpp"

namespace loom_ops::rope_heads_math {

struct Pair {
  float lo, hi;  // channels j and j + D/2
};

// The pair rotated: (lo cos_lo - hi sin_lo, hi cos_hi + lo sin_hi).
LOOM_OPS_HOST_DEVICE inline Pair rotate(Pair x, Pair c, Pair s) {
  return {x.lo * c.lo - x.hi * s.lo, x.hi * c.hi + x.lo * s.hi};
}

// The rotation's transpose, which takes the gradient of y to that of x:
// (dy_lo cos_lo + dy_hi sin_hi, dy_hi cos_hi - dy_lo sin_lo).
LOOM_OPS_HOST_DEVICE inline Pair rotate_back(Pair dy, Pair c, Pair s) {
  return {dy.lo * c.lo + dy.hi * s.hi, dy.hi * c.hi - dy.lo * s.lo};
}

// Where row `row` of x (B, T, H, D) as rows of D goes in y (B, H, T, D), and its position.
struct RowPlace {
  int64_t out_row, t, b;
};
LOOM_OPS_HOST_DEVICE inline RowPlace place_of(int64_t row, int64_t T, int64_t H) {
  const int64_t h = row % H, t = (row / H) % T, b = row / (H * T);
  return {(b * H + h) * T + t, t, b};
}

}  // namespace loom_ops::rope_heads_math
