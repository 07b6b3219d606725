// gelu_tanh_kernel.hpp: what gelu_tanh.cu exports, in CUDA runtime types only (no ATen), so
// that the .cu compiles alone and fast. The same function as the CPU loops:
//   y = x / (1 + exp(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
// and its derivative, computed in fp32 whatever the element type.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../cuda_common/element_type.hpp"

namespace loom_ops::cuda {

struct GeluTanhParams {
  ElementType type = ElementType::float32;
  int64_t count = 0;           // elements of each buffer
  const void* x = nullptr;     // the input, contiguous
  const void* dy = nullptr;    // backward only: the output's gradient, contiguous
  void* out = nullptr;         // forward: y; backward: dx
};

// Enqueue on `stream`; the return is the launch's status (cudaGetLastError after it).
cudaError_t launch_gelu_tanh_forward(const GeluTanhParams& p, cudaStream_t stream);
cudaError_t launch_gelu_tanh_backward(const GeluTanhParams& p, cudaStream_t stream);

}  // namespace loom_ops::cuda
