// cross_entropy_rows_kernel.hpp: what cross_entropy_rows.cu exports, in CUDA runtime types only
// (no ATen), so that the .cu compiles alone and fast.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../cuda_common/element_type.hpp"

namespace loom_ops::cuda {

struct CrossEntropyRowsParams {
  ElementType type = ElementType::float32;  // of logits
  int64_t rows = 0, columns = 0;            // logits: contiguous (rows, columns)
  int64_t ignore_index = -100;
  bool write_gradient = false;
  void* logits = nullptr;            // read; with write_gradient, overwritten by the gradient
  const int64_t* targets = nullptr;  // (rows)
  float* loss = nullptr;             // (rows): written
};

// Enqueue on `stream`; the return is the launch's status (cudaGetLastError after it).
cudaError_t launch_cross_entropy_rows(const CrossEntropyRowsParams& p, cudaStream_t stream);

}  // namespace loom_ops::cuda
