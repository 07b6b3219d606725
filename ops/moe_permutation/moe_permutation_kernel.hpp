// moe_permutation_kernel.hpp: what moe_permutation.cu exports, in CUDA runtime types only (no
// ATen). Rows of C elements; N tokens, k choices each, N k pairs and positions.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../cuda_common/element_type.hpp"

namespace loom_ops::cuda {

struct MoePermutationParams {
  ElementType type = ElementType::float32;
  int64_t tokens = 0, choices = 0, width = 0;  // N, k, C
  const int64_t* order = nullptr;    // (N k): the pair at each position
  const int64_t* inverse = nullptr;  // (N k): each pair's position; a negative one traps (order repeats a pair)
  const void* x = nullptr;           // gather: (N, C) tokens; sum: (N k, C) rows
  const void* weight = nullptr;      // (N k) per pair, or null (a plain sum)
  const void* dout = nullptr;        // combine backward: (N, C)
  void* out = nullptr;               // gather: (N k, C); sum: (N, C); combine backward: d rows (N k, C)
  void* dweight = nullptr;           // combine backward: (N k) per pair
};

// rows[i] = x[order[i] / k] (moe_permute forward). An order entry outside 0 .. N k - 1 traps.
cudaError_t launch_moe_gather(const MoePermutationParams& p, cudaStream_t stream);
// out[n] = sum over token n's positions, ascending, of x[position] (times weight[pair]), in fp32,
// rounded once (moe_permute backward, moe_combine forward).
cudaError_t launch_moe_sum(const MoePermutationParams& p, cudaStream_t stream);
// moe_combine backward: out[i] = dout[order[i] / k] weight[order[i]], dweight[order[i]] = dot(dout[order[i] / k], x[i]).
cudaError_t launch_moe_combine_backward(const MoePermutationParams& p, cudaStream_t stream);

}  // namespace loom_ops::cuda
