// rope_heads_cpu.hpp: the CPU loops behind rope_heads.cpp, one row (b, t, h) of D channels at a
// time, fp32, on raw pointers.
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

struct RopeHeadsArgs {
  const float* x = nullptr;            // (B, T, H, D) contiguous
  const float* w = nullptr;            // (D), or null: no norm
  const float* cos = nullptr;          // (table rows, D)
  const float* sin = nullptr;          // (table rows, D)
  const int64_t* positions = nullptr;  // (B, T), or null: t
  int64_t B = 0, T = 0, H = 0, D = 0;
  float eps = 0;
};

// Rows [begin, end) of B T H: y (B, H, T, D), and each row's 1 / rms where there is a norm.
void rope_heads_forward(const RopeHeadsArgs& a, float* y, float* inverse_rms, int64_t begin, int64_t end);
// dy (B, H, T, D) -> dx (B, T, H, D) for rows [begin, end), and their share of dw added to dw_sum (D) where there is a norm.
void rope_heads_backward(const RopeHeadsArgs& a, const float* inverse_rms, const float* dy, float* dx, float* dw_sum,
                         int64_t begin, int64_t end);

}  // namespace loom_ops::cpu
