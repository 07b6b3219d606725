// swiglu_kernel.hpp: what swiglu.cu exports, in CUDA runtime types only (no ATen), so that the
// .cu compiles alone and fast. y = silu(g) u and its gradients, computed in fp32 whatever the
// element type, with the formulas of swiglu_math.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../cuda_common/element_type.hpp"

namespace loom_ops::cuda {

struct SwigluParams {
  ElementType type = ElementType::float32;
  int64_t count = 0;              // elements of each buffer, all contiguous
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* dy = nullptr;       // backward only: the output's gradient
  void* y = nullptr;              // forward only
  void* dgate = nullptr;          // backward only
  void* dup = nullptr;            // backward only
};

// Enqueue on `stream`; the return is the launch's status (cudaGetLastError after it).
cudaError_t launch_swiglu_forward(const SwigluParams& p, cudaStream_t stream);
cudaError_t launch_swiglu_backward(const SwigluParams& p, cudaStream_t stream);

}  // namespace loom_ops::cuda
