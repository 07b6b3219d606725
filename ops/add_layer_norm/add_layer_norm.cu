// The residual add + LayerNorm kernels: one block of 256 threads a row (grid-stride over rows),
// each thread a strided share of the row's columns, the row's sums reduced across the block in
// fp32. The roundings are the reference's: s is rounded to the element type, the norm computed
// from it in fp32 and y rounded once, as at::layer_norm does; backward in fp32, ds rounded once.
#include <type_traits>

#include "../cuda_common/block_sum.cuh"
#include "../cuda_common/elements.cuh"
#include "../cuda_common/row_blocks.hpp"
#include "../cuda_common/layer_norm_math.hpp"
#include "add_layer_norm_kernel.hpp"

namespace loom_ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T, typename D>  // D: delta's type, T's or narrower beside a float32 x (elements.cuh)
__global__ void __launch_bounds__(kThreads) forward_kernel(AddLayerNormParams p) {
  __shared__ float scratch[kWarps];
  const T* x = static_cast<const T*>(p.x);
  const D* delta = static_cast<const D*>(p.delta);
  const T *w = static_cast<const T*>(p.w), *b = static_cast<const T*>(p.b);
  T *s = static_cast<T*>(p.s), *y = static_cast<T*>(p.y);
  const int64_t d = p.columns;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t base = row * d;
    float sum = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float v = rounded<T>(load(x, base + j) + load(delta, base + j));
      store(s, base + j, v);
      sum += v;
    }
    const float mean = block_sum<kWarps>(sum, scratch) / static_cast<float>(d);
    float deviations = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {  // each thread reads back what it wrote
      const float c = load(s, base + j) - mean;
      deviations += c * c;
    }
    const float rstd = layer_norm_math::inverse_std(block_sum<kWarps>(deviations, scratch), d, p.eps);
    if (threadIdx.x == 0) {
      p.mean[row] = mean;
      p.rstd[row] = rstd;
    }
    for (int64_t j = threadIdx.x; j < d; j += kThreads)
      store(y, base + j, (load(s, base + j) - mean) * rstd * load(w, j) + (b ? load(b, j) : 0.0f));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) backward_kernel(AddLayerNormParams p) {
  __shared__ float scratch[kWarps];
  extern __shared__ float sums[];  // 2 d floats: this block's rows' dw, then db; thread t owns columns t, t + 256, ...
  const T *dy = static_cast<const T*>(p.dy), *ds_in = static_cast<const T*>(p.ds_in);
  const T *s = static_cast<const T*>(p.s), *w = static_cast<const T*>(p.w);
  T* ds = static_cast<T*>(p.ds);
  const int64_t d = p.columns;
  float *dw_sum = sums, *db_sum = sums + d;
  for (int64_t j = threadIdx.x; j < d; j += kThreads) dw_sum[j] = 0, db_sum[j] = 0;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t base = row * d;
    const float mean = p.mean[row], rstd = p.rstd[row];
    float g_sum = 0, gx_sum = 0;
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float g = load(dy, base + j), xhat = (load(s, base + j) - mean) * rstd;
      g_sum += g * load(w, j);
      gx_sum += g * load(w, j) * xhat;
      dw_sum[j] += g * xhat;
      db_sum[j] += g;
    }
    g_sum = block_sum<kWarps>(g_sum, scratch);
    gx_sum = block_sum<kWarps>(gx_sum, scratch);
    for (int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float xhat = (load(s, base + j) - mean) * rstd;
      const float g = layer_norm_math::normalised_grad(load(dy, base + j) * load(w, j), xhat, rstd, g_sum, gx_sum, d);
      store(ds, base + j, ds_in ? g + load(ds_in, base + j) : g);
    }
  }
  float* out = p.partial + static_cast<int64_t>(blockIdx.x) * 2 * d;
  for (int64_t j = threadIdx.x; j < d; j += kThreads) out[j] = dw_sum[j], out[d + j] = db_sum[j];
}

bool nothing_to_do(const AddLayerNormParams& p) { return p.rows == 0 || p.columns == 0; }

}  // namespace

cudaError_t launch_add_layer_norm_forward(const AddLayerNormParams& p, cudaStream_t stream) {
  if (nothing_to_do(p)) return cudaSuccess;
  if (p.columns > kAddLayerNormMostColumns) return cudaErrorInvalidValue;
  return dispatch_delta_type(p.type, p.delta_type, [&](auto* x_tag, auto* delta_tag) {
    using T = std::remove_pointer_t<decltype(x_tag)>;
    using D = std::remove_pointer_t<decltype(delta_tag)>;
    forward_kernel<T, D><<<row_forward_blocks(p.rows), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_add_layer_norm_backward(const AddLayerNormParams& p, cudaStream_t stream) {
  if (nothing_to_do(p)) return cudaSuccess;
  if (p.columns > kAddLayerNormMostColumns) return cudaErrorInvalidValue;
  return dispatch_element_type(p.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const size_t shared = 2 * static_cast<size_t>(p.columns) * sizeof(float);
    backward_kernel<T><<<static_cast<unsigned>(row_partial_blocks(p.rows)), kThreads, shared, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace loom_ops::cuda
