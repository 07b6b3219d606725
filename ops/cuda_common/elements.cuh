// elements.cuh: what every loom_ops_cuda kernel does with its element type, device side: an
// element read as fp32, fp32 stored as the element (rounded to nearest), fp32 rounded as the
// element holds it, and a launch dispatched on ElementType. CUDA runtime headers only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "element_type.hpp"

namespace loom_ops::cuda {

__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16(v); }
__device__ inline void store(__half* p, int64_t i, float v) { p[i] = __float2half(v); }

// v as the element type T holds it.
template <typename T> __device__ inline float rounded(float v);
template <> __device__ inline float rounded<float>(float v) { return v; }
template <> __device__ inline float rounded<__nv_bfloat16>(float v) { return __bfloat162float(__float2bfloat16(v)); }
template <> __device__ inline float rounded<__half>(float v) { return __half2float(__float2half(v)); }

// The blocks of `threads` threads an elementwise grid-stride kernel over n elements starts:
// enough to fill the device several times over (at most 65535); the loop covers the rest.
inline unsigned grid_stride_blocks(int64_t n, int threads) {
  const int64_t wanted = (n + threads - 1) / threads;
  return static_cast<unsigned>(wanted < 65535 ? (wanted > 0 ? wanted : 1) : 65535);
}

// launch(static_cast<T*>(nullptr)) for the C++ type T of `type` (a generic lambda takes the
// pointer as `auto* tag` and names T as std::remove_pointer_t<decltype(tag)>): the launch's
// status, or cudaErrorInvalidValue for a type outside the enum.
template <typename Launch>
cudaError_t dispatch_element_type(ElementType type, Launch&& launch) {
  switch (type) {
    case ElementType::float32: return launch(static_cast<float*>(nullptr));
    case ElementType::bfloat16: return launch(static_cast<__nv_bfloat16*>(nullptr));
    case ElementType::float16: return launch(static_cast<__half*>(nullptr));
  }
  return cudaErrorInvalidValue;
}

// launch(x_tag, delta_tag) for a residual add whose branch, delta, may be narrower than x: the
// same type, or a float32 x beside a bfloat16 or float16 delta (autocast's residual stream:
// x's type is the sum's, as ATen promotes it). Any other pair: cudaErrorInvalidValue.
template <typename Launch>
cudaError_t dispatch_delta_type(ElementType x_type, ElementType delta_type, Launch&& launch) {
  if (x_type == delta_type)
    return dispatch_element_type(x_type, [&](auto* tag) { return launch(tag, tag); });
  if (x_type != ElementType::float32) return cudaErrorInvalidValue;
  return dispatch_element_type(delta_type, [&](auto* delta_tag) { return launch(static_cast<float*>(nullptr), delta_tag); });
}

}  // namespace loom_ops::cuda
