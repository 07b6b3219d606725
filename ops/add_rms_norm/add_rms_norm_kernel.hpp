// add_rms_norm_kernel.hpp: what add_rms_norm.cu exports, in CUDA runtime types only (no ATen),
// so that the .cu compiles alone and fast.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../cuda_common/element_type.hpp"

namespace loom_ops::cuda {

// The most elements a row may have: backward sums each block's share of dw in shared memory
// (one float an element, within the 48 KiB a block gets without opting in).
constexpr int64_t kAddRmsNormMostColumns = 12288;

struct AddRmsNormParams {
  ElementType type = ElementType::float32;  // of every buffer but delta, inverse_rms and dw_partial
  ElementType delta_type = ElementType::float32;  // type, or bfloat16/float16 beside a float32 x
  int64_t rows = 0, columns = 0;                  // contiguous (rows, columns) buffers
  float eps = 0;
  const void* x = nullptr;      // forward
  const void* delta = nullptr;  // forward; null: RMSNorm alone (s is x and is not written)
  const void* w = nullptr;      // (columns)
  void* s = nullptr;            // forward: written (x + delta); backward: read
  void* y = nullptr;            // forward: written
  float* inverse_rms = nullptr;  // (rows): forward writes, backward reads
  const void* dy = nullptr;      // backward: the gradient of y
  const void* ds_in = nullptr;   // backward: the gradient of s from its other uses, or null
  void* ds = nullptr;            // backward: written, the gradient of x and of delta
  float* dw_partial = nullptr;   // backward: (row_partial_blocks(rows), columns), each block's share of dw
};

// Enqueue on `stream`; the return is the launch's status (cudaGetLastError after it).
cudaError_t launch_add_rms_norm_forward(const AddRmsNormParams& p, cudaStream_t stream);
cudaError_t launch_add_rms_norm_backward(const AddRmsNormParams& p, cudaStream_t stream);

}  // namespace loom_ops::cuda
