// The SwiGLU kernels: one thread per element, grid-stride, fp32 arithmetic with the reference's
// roundings. Memory-bound: two reads and one write forward, three reads and two writes backward.
#include <type_traits>

#include "../cuda_common/elements.cuh"
#include "swiglu_kernel.hpp"
#include "swiglu_math.hpp"

namespace loom_ops::cuda {
namespace {

using swiglu_math::sigmoid;
using swiglu_math::silu_slope;

// at::silu(g) * u rounds silu(g) to T before the product.
template <typename T>
__global__ void forward_kernel(const T* gate, const T* up, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = load(gate, i);
    store(y, i, rounded<T>(g * sigmoid(g)) * load(up, i));
  }
}

// The composition's backward: du = dy silu(g) with silu(g) as T; dg = (dy u as T) silu'(g).
template <typename T>
__global__ void backward_kernel(const T* dy, const T* gate, const T* up, T* dgate, T* dup, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = load(gate, i), s = sigmoid(g), d = load(dy, i);
    store(dup, i, d * rounded<T>(g * s));
    store(dgate, i, rounded<T>(d * load(up, i)) * silu_slope(g, s));
  }
}

constexpr int kThreads = 256;

template <typename T>
cudaError_t launch(const SwigluParams& p, cudaStream_t stream, bool backward) {
  if (p.count == 0) return cudaSuccess;
  const T* gate = static_cast<const T*>(p.gate);
  const T* up = static_cast<const T*>(p.up);
  if (backward)
    backward_kernel<T><<<grid_stride_blocks(p.count, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(p.dy), gate, up, static_cast<T*>(p.dgate), static_cast<T*>(p.dup), p.count);
  else
    forward_kernel<T><<<grid_stride_blocks(p.count, kThreads), kThreads, 0, stream>>>(gate, up, static_cast<T*>(p.y), p.count);
  return cudaGetLastError();
}

cudaError_t dispatch(const SwigluParams& p, cudaStream_t stream, bool backward) {
  return dispatch_element_type(p.type, [&](auto* tag) {
    return launch<std::remove_pointer_t<decltype(tag)>>(p, stream, backward);
  });
}

}  // namespace

cudaError_t launch_swiglu_forward(const SwigluParams& p, cudaStream_t stream) { return dispatch(p, stream, false); }
cudaError_t launch_swiglu_backward(const SwigluParams& p, cudaStream_t stream) { return dispatch(p, stream, true); }

}  // namespace loom_ops::cuda
