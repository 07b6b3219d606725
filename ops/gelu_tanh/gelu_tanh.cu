// The GELU-tanh kernels: one thread per element, grid-stride, fp32 arithmetic. Memory-bound:
// one read and one write forward, two reads and one write backward.
#include <type_traits>

#include "../cuda_common/elements.cuh"
#include "gelu_tanh_kernel.hpp"

namespace loom_ops::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;  // Hendrycks & Gimpel, arXiv:1606.08415, the tanh approximation

// sigmoid(2u): 0.5 (1 + tanh(u)) written with one exponential.
__device__ inline float sigmoid_2u(float v) { return 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v))); }

template <typename T>
__global__ void forward_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = load(x, i);
    store(y, i, v * sigmoid_2u(v));
  }
}

template <typename T>
__global__ void backward_kernel(const T* dy, const T* x, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = load(x, i), s = sigmoid_2u(v);
    store(dx, i, load(dy, i) * (s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v)));
  }
}

constexpr int kThreads = 256;

template <typename T>
cudaError_t launch(const GeluTanhParams& p, cudaStream_t stream, bool backward) {
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  if (p.count == 0) return cudaSuccess;
  if (backward)
    backward_kernel<T><<<grid_stride_blocks(p.count, kThreads), kThreads, 0, stream>>>(static_cast<const T*>(p.dy), x, out, p.count);
  else
    forward_kernel<T><<<grid_stride_blocks(p.count, kThreads), kThreads, 0, stream>>>(x, out, p.count);
  return cudaGetLastError();
}

cudaError_t dispatch(const GeluTanhParams& p, cudaStream_t stream, bool backward) {
  return dispatch_element_type(p.type, [&](auto* tag) {
    return launch<std::remove_pointer_t<decltype(tag)>>(p, stream, backward);
  });
}

}  // namespace

cudaError_t launch_gelu_tanh_forward(const GeluTanhParams& p, cudaStream_t stream) { return dispatch(p, stream, false); }
cudaError_t launch_gelu_tanh_backward(const GeluTanhParams& p, cudaStream_t stream) { return dispatch(p, stream, true); }

}  // namespace loom_ops::cuda
