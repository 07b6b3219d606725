// rope_heads_kernel.hpp: what rope_heads.cu exports, in CUDA runtime types only (no ATen), so
// that the .cu compiles alone and fast. The formulas are rope_heads_math.hpp's and
// cuda_common/rms_norm_math.hpp's, computed in fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../cuda_common/element_type.hpp"

namespace loom_ops::cuda {

// The widest head a warp holds in registers (16 channel pairs a lane).
constexpr int64_t kRopeHeadsMostChannels = 1024;

struct RopeHeadsParams {
  ElementType x_type = ElementType::float32;    // x's and dx's
  ElementType out_type = ElementType::float32;  // y's, dy's and w's: x_type, or float32
  int64_t B = 0, T = 0, H = 0, D = 0;           // x is (B, T, H, D), y (B, H, T, D)
  int64_t table_rows = 0;                       // cos and sin are (table_rows, D) fp32
  float eps = 0;
  const void* x = nullptr;
  const void* w = nullptr;                      // (D) or null: no norm
  const float* cos = nullptr;
  const float* sin = nullptr;
  const int64_t* positions = nullptr;           // (B, T) or null: t; a row outside the table traps
  float* inverse_rms = nullptr;                 // (B T H), written forward and read backward with a norm
  void* y = nullptr;                            // forward only
  const void* dy = nullptr;                     // backward only, (B, H, T, D) contiguous
  void* dx = nullptr;                           // backward only
  float* dw = nullptr;                          // backward with a norm: (D), zeroed by the caller, summed into
};

// Enqueue on `stream`; the return is the launch's status (cudaGetLastError after it), or
// cudaErrorInvalidValue for a D that is odd or wider than kRopeHeadsMostChannels, or types the
// kernels do not pair.
cudaError_t launch_rope_heads_forward(const RopeHeadsParams& p, cudaStream_t stream);
cudaError_t launch_rope_heads_backward(const RopeHeadsParams& p, cudaStream_t stream);

}  // namespace loom_ops::cuda
