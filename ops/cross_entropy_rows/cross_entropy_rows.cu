// The softmax cross-entropy of each row, and its gradient over the row: one block of 256 threads
// a row (grid-stride over rows), each thread a strided share of the row's values. The first pass
// keeps each thread's (maximum, sum of exponentials) online and merges them across the block;
// the second writes softmax - one_hot(target), each value rounded once. The thread whose share
// holds the target reads it in its own second pass and writes the row's loss, so no value is
// read after another thread has written it. A target outside [0, V) traps.
#include <type_traits>

#include "../cuda_common/elements.cuh"
#include "../cuda_common/row_blocks.hpp"
#include "cross_entropy_rows_kernel.hpp"
#include "cross_entropy_rows_math.hpp"

namespace loom_ops::cuda {
namespace {

using cross_entropy_rows_math::MaxSum;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// The block's summary of every thread's, on every thread. `scratch` holds kWarps summaries; the
// block syncs twice.
__device__ MaxSum block_summary(MaxSum s, MaxSum* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, s.max, offset), __shfl_xor_sync(0xffffffffu, s.sum, offset)};
    s = cross_entropy_rows_math::merge(s, other);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = s;
  __syncthreads();
  MaxSum total{-INFINITY, 0.0f};
  for (int k = 0; k < kWarps; ++k) total = cross_entropy_rows_math::merge(total, scratch[k]);
  __syncthreads();  // every thread has read scratch before the next row writes it
  return total;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) rows_kernel(T* logits, const int64_t* targets, float* loss, int64_t rows,
                                                        int64_t V, int64_t ignore_index, bool write_gradient) {
  __shared__ MaxSum scratch[kWarps];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    T* x = logits + row * V;
    const int64_t target = targets[row];
    if (target == ignore_index) {
      if (threadIdx.x == 0) loss[row] = 0.0f;
      if (write_gradient)
        for (int64_t j = threadIdx.x; j < V; j += kThreads) store(x, j, 0.0f);
      continue;
    }
    if (target < 0 || target >= V) __trap();
    MaxSum s{-INFINITY, 0.0f};
    for (int64_t j = threadIdx.x; j < V; j += kThreads) s = cross_entropy_rows_math::add(s, load(x, j));
    const MaxSum whole = block_summary(s, scratch);
    const float log_sum = logf(whole.sum);
    if (threadIdx.x == target % kThreads)  // before any write to it
      loss[row] = -cross_entropy_rows_math::log_probability(load(x, target), whole);
    if (!write_gradient) continue;
    for (int64_t j = threadIdx.x; j < V; j += kThreads)
      store(x, j, cross_entropy_rows_math::gradient(load(x, j), whole.max, log_sum, j == target));
  }
}

template <typename T>
cudaError_t launch(const CrossEntropyRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.columns <= 0) return cudaErrorInvalidValue;
  rows_kernel<T><<<row_forward_blocks(p.rows), kThreads, 0, stream>>>(
      static_cast<T*>(p.logits), p.targets, p.loss, p.rows, p.columns, p.ignore_index, p.write_gradient);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_cross_entropy_rows(const CrossEntropyRowsParams& p, cudaStream_t stream) {
  return dispatch_element_type(p.type, [&](auto* tag) { return launch<std::remove_pointer_t<decltype(tag)>>(p, stream); });
}

}  // namespace loom_ops::cuda
