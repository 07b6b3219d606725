// The residual add + RMSNorm kernels: one block of 256 threads a row (grid-stride over rows),
// each thread a strided share of the row's columns, the row's sums reduced across the block in
// fp32. The roundings are the reference's: s is rounded to the element type before it is squared
// and normalised, the normalised value before it meets w, dy w before the norm's gradient. delta
// may be narrower than x (autocast's bf16 branch beside an fp32 residual: x's type is then the
// sum's, as the reference promotes it); backward's gradient is x's type for both. Without delta
// (null) the kernels are RMSNorm alone: s is x, and forward does not write it.
#include <type_traits>

#include "../cuda_common/block_sum.cuh"
#include "../cuda_common/elements.cuh"
#include "../cuda_common/row_blocks.hpp"
#include "add_rms_norm_kernel.hpp"
#include "../cuda_common/rms_norm_math.hpp"

namespace loom_ops::cuda {
namespace {

using rms_norm_math::inverse_rms;
using rms_norm_math::normalised_grad;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T, typename D>
__global__ void __launch_bounds__(kThreads) forward_kernel(const T* x, const D* delta, const T* w, T* s, T* y,
                                                           float* inverse, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[kWarps];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * d;
    float squares = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      if (!delta) {  // RMSNorm alone: s is x
        const float v = load(x, base + j);
        squares += v * v;
        continue;
      }
      const float v = rounded<T>(load(x, base + j) + load(delta, base + j));
      store(s, base + j, v);
      squares += v * v;
    }
    const float r = inverse_rms(block_sum<kWarps>(squares, scratch), d, eps);
    if (threadIdx.x == 0) inverse[row] = r;
    const T* normalised = delta ? s : x;
    for (int64_t j = threadIdx.x; j < d; j += kThreads)  // each thread reads back what it wrote
      store(y, base + j, rounded<T>(load(normalised, base + j) * r) * load(w, j));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) backward_kernel(const T* dy, const T* ds_in, const T* s, const T* w,
                                                            const float* inverse, T* ds, float* dw_partial,
                                                            int64_t rows, int64_t d) {
  __shared__ float scratch[kWarps];
  extern __shared__ float dw_sum[];  // d floats: this block's rows' dw; thread t owns columns t, t + 256, ...
  for (int64_t j = threadIdx.x; j < d; j += kThreads) dw_sum[j] = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * d;
    const float r = inverse[row];
    float dot = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float g = load(dy, base + j), v = load(s, base + j);
      dot += rounded<T>(g * load(w, j)) * v;
      dw_sum[j] += g * rounded<T>(v * r);
    }
    dot = block_sum<kWarps>(dot, scratch);
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float g = rounded<T>(normalised_grad(rounded<T>(load(dy, base + j) * load(w, j)), load(s, base + j), r, dot, d));
      store(ds, base + j, ds_in ? g + load(ds_in, base + j) : g);
    }
  }
  for (int64_t j = threadIdx.x; j < d; j += kThreads) dw_partial[blockIdx.x * d + j] = dw_sum[j];
}

template <typename T, typename D>
cudaError_t launch_forward(const AddRmsNormParams& p, cudaStream_t stream) {
  forward_kernel<T, D><<<row_forward_blocks(p.rows), kThreads, 0, stream>>>(
      static_cast<const T*>(p.x), static_cast<const D*>(p.delta), static_cast<const T*>(p.w), static_cast<T*>(p.s),
      static_cast<T*>(p.y), p.inverse_rms, p.rows, p.columns, p.eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_backward(const AddRmsNormParams& p, cudaStream_t stream) {
  const size_t shared = static_cast<size_t>(p.columns) * sizeof(float);
  backward_kernel<T><<<static_cast<unsigned>(row_partial_blocks(p.rows)), kThreads, shared, stream>>>(
      static_cast<const T*>(p.dy), static_cast<const T*>(p.ds_in), static_cast<const T*>(p.s),
      static_cast<const T*>(p.w), p.inverse_rms, static_cast<T*>(p.ds), p.dw_partial, p.rows, p.columns);
  return cudaGetLastError();
}

bool nothing_to_do(const AddRmsNormParams& p) { return p.rows == 0 || p.columns == 0; }

}  // namespace

cudaError_t launch_add_rms_norm_forward(const AddRmsNormParams& p, cudaStream_t stream) {
  if (nothing_to_do(p)) return cudaSuccess;
  if (p.columns > kAddRmsNormMostColumns) return cudaErrorInvalidValue;
  return dispatch_delta_type(p.type, p.delta_type, [&](auto* x_tag, auto* delta_tag) {
    return launch_forward<std::remove_pointer_t<decltype(x_tag)>, std::remove_pointer_t<decltype(delta_tag)>>(p, stream);
  });
}

cudaError_t launch_add_rms_norm_backward(const AddRmsNormParams& p, cudaStream_t stream) {
  if (nothing_to_do(p)) return cudaSuccess;
  if (p.columns > kAddRmsNormMostColumns) return cudaErrorInvalidValue;
  return dispatch_element_type(p.type, [&](auto* tag) { return launch_backward<std::remove_pointer_t<decltype(tag)>>(p, stream); });
}

}  // namespace loom_ops::cuda
