// The MoE permutation kernels: a gather (one thread per element), and two row-per-block kernels
// whose sums run in fp32 in a fixed order, so no atomics: each token's sum walks its positions
// ascending, and each pair's dot product is one block's reduction.
#include <type_traits>

#include "../cuda_common/block_sum.cuh"
#include "../cuda_common/elements.cuh"
#include "../cuda_common/row_blocks.hpp"
#include "moe_permutation_kernel.hpp"
#include "moe_permutation_math.hpp"

namespace loom_ops::cuda {
namespace {

using moe_permutation_math::kMaxChoices;

constexpr int kWarps = 8, kThreads = kWarps * 32;

template <typename T>
__global__ void gather_kernel(MoePermutationParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* rows = static_cast<T*>(p.out);
  const int64_t pairs = p.tokens * p.choices, n = pairs * p.width;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / p.width, pair = p.order[i];
    if (pair < 0 || pair >= pairs) __trap();  // as index_select's device assert
    rows[e] = x[pair / p.choices * p.width + e % p.width];
  }
}

// One block per token (grid-stride over tokens): its positions sorted once into shared memory.
template <typename T>
__global__ void sum_kernel(MoePermutationParams p) {
  __shared__ int64_t position[kMaxChoices], pair[kMaxChoices];
  const T* x = static_cast<const T*>(p.x);
  const T* weight = static_cast<const T*>(p.weight);
  T* out = static_cast<T*>(p.out);
  const int k = static_cast<int>(p.choices);
  for (int64_t n = blockIdx.x; n < p.tokens; n += gridDim.x) {
    if (threadIdx.x == 0) {
      moe_permutation_math::token_positions(p.inverse, n, k, position, pair);
      for (int j = 0; j < k; ++j)
        if (position[j] < 0) __trap();  // a pair order never named: order repeats another
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < p.width; c += blockDim.x) {
      float acc = 0;
      for (int j = 0; j < k; ++j) {
        const float v = load(x, position[j] * p.width + c);
        acc += weight ? v * load(weight, pair[j]) : v;
      }
      store(out, n * p.width + c, acc);
    }
    __syncthreads();  // before the next token overwrites the positions
  }
}

// One block per position (grid-stride over positions).
template <typename T>
__global__ void combine_backward_kernel(MoePermutationParams p) {
  __shared__ float scratch[kWarps];
  const T* rows = static_cast<const T*>(p.x);
  const T* weight = static_cast<const T*>(p.weight);
  const T* dout = static_cast<const T*>(p.dout);
  T* drows = static_cast<T*>(p.out);
  T* dweight = static_cast<T*>(p.dweight);
  const int64_t pairs = p.tokens * p.choices;
  for (int64_t i = blockIdx.x; i < pairs; i += gridDim.x) {
    const int64_t pair = p.order[i];
    if (pair < 0 || pair >= pairs) __trap();
    const int64_t token = pair / p.choices;
    const float w = load(weight, pair);
    float dot = 0;
    for (int64_t c = threadIdx.x; c < p.width; c += blockDim.x) {
      const float g = load(dout, token * p.width + c);
      store(drows, i * p.width + c, g * w);
      dot += g * load(rows, i * p.width + c);
    }
    dot = block_sum<kWarps>(dot, scratch);
    if (threadIdx.x == 0) store(dweight, pair, dot);
  }
}

enum class Kernel { gather, sum, combine_backward };

template <typename T>
cudaError_t launch(const MoePermutationParams& p, cudaStream_t stream, Kernel kernel) {
  const int64_t pairs = p.tokens * p.choices;
  if (pairs == 0 || (p.width == 0 && kernel != Kernel::combine_backward)) return cudaSuccess;
  switch (kernel) {
    case Kernel::gather:
      gather_kernel<T><<<grid_stride_blocks(pairs * p.width, kThreads), kThreads, 0, stream>>>(p);
      break;
    case Kernel::sum: sum_kernel<T><<<row_forward_blocks(p.tokens), kThreads, 0, stream>>>(p); break;
    case Kernel::combine_backward:
      combine_backward_kernel<T><<<row_forward_blocks(pairs), kThreads, 0, stream>>>(p);
      break;
  }
  return cudaGetLastError();
}

cudaError_t dispatch(const MoePermutationParams& p, cudaStream_t stream, Kernel kernel) {
  if (p.choices < 1 || p.choices > kMaxChoices) return cudaErrorInvalidValue;
  return dispatch_element_type(p.type, [&](auto* tag) {
    return launch<std::remove_pointer_t<decltype(tag)>>(p, stream, kernel);
  });
}

}  // namespace

cudaError_t launch_moe_gather(const MoePermutationParams& p, cudaStream_t stream) {
  return dispatch(p, stream, Kernel::gather);
}
cudaError_t launch_moe_sum(const MoePermutationParams& p, cudaStream_t stream) { return dispatch(p, stream, Kernel::sum); }
cudaError_t launch_moe_combine_backward(const MoePermutationParams& p, cudaStream_t stream) {
  return dispatch(p, stream, Kernel::combine_backward);
}

}  // namespace loom_ops::cuda
