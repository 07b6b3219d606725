// block_sum.cuh: a sum over one block's threads, the reduction the row-per-block kernels (the
// fused norms) run for each row. CUDA runtime headers only.
#pragma once

#include <cuda_runtime_api.h>

namespace loom_ops::cuda {

// The block's sum of v, on every thread, for a block of kWarps whole warps. `scratch` holds
// kWarps floats; the block syncs twice.
template <int kWarps>
__device__ float block_sum(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0;
  for (int k = 0; k < kWarps; ++k) total += scratch[k];
  __syncthreads();  // every thread has read scratch before the next sum writes it
  return total;
}

}  // namespace loom_ops::cuda
