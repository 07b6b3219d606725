// add_layer_norm_kernel.hpp: what add_layer_norm.cu exports, in CUDA runtime types only (no
// ATen), so that the .cu compiles alone and fast.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../cuda_common/element_type.hpp"

namespace loom_ops::cuda {

// The most elements a row may have: backward sums each block's share of dw and db in shared
// memory (two floats an element, within the 48 KiB a block gets without opting in).
constexpr int64_t kAddLayerNormMostColumns = 6144;

struct AddLayerNormParams {
  ElementType type = ElementType::float32;  // of every buffer but delta, mean, rstd and partial
  ElementType delta_type = ElementType::float32;  // type, or bfloat16/float16 beside a float32 x
  int64_t rows = 0, columns = 0;            // contiguous (rows, columns) buffers
  float eps = 0;
  const void* x = nullptr;      // forward
  const void* delta = nullptr;  // forward
  const void* w = nullptr;      // (columns)
  const void* b = nullptr;      // (columns), or null: no bias (forward)
  void* s = nullptr;            // forward: written (x + delta); backward: read
  void* y = nullptr;            // forward: written
  float* mean = nullptr;        // (rows): forward writes, backward reads
  float* rstd = nullptr;        // (rows): forward writes, backward reads
  const void* dy = nullptr;     // backward: the gradient of y
  const void* ds_in = nullptr;  // backward: the gradient of s from its other uses, or null
  void* ds = nullptr;           // backward: written, the gradient of x and of delta
  float* partial = nullptr;     // backward: (row_partial_blocks(rows), 2, columns), each block's dw and db
};

// Enqueue on `stream`; the return is the launch's status (cudaGetLastError after it).
cudaError_t launch_add_layer_norm_forward(const AddLayerNormParams& p, cudaStream_t stream);
cudaError_t launch_add_layer_norm_backward(const AddLayerNormParams& p, cudaStream_t stream);

}  // namespace loom_ops::cuda
