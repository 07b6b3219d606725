// kernel_table.hpp: how the entry points reach loom_ops_cuda's kernels without linking it.
// loom_ops is built everywhere and cannot name the kernels (they exist only where nvcc does);
// loom_ops_cuda installs this table of its kernels (cuda::use_kernels, <loom_ops/cuda_kernels.hpp>)
// and each entry point, given CUDA tensors, asks the installed table first. No table (the
// default): every entry point takes its ATen path on CUDA, as before the kernels existed.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/rotary.hpp>

#include <cstdint>
#include <optional>
#include <utility>

namespace loom_ops::cuda_dispatch {

using TensorPair = std::pair<at::Tensor, at::Tensor>;

// Each entry runs the op's kernel, or returns nothing where the kernel does not take these
// arguments (a dtype it lacks, tensors of mixed dtypes, a row past its limit): the entry point
// then takes its ATen path, so a table never turns a call that worked into a refusal.
struct KernelTable {
  std::optional<at::Tensor> (*gelu_tanh)(const at::Tensor& x);
  std::optional<at::Tensor> (*swiglu)(const at::Tensor& gate, const at::Tensor& up);
  std::optional<at::Tensor> (*rms_norm)(const at::Tensor& x, const at::Tensor& w, double eps);
  std::optional<TensorPair> (*add_rms_norm)(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                            double eps);
  std::optional<TensorPair> (*add_layer_norm)(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                              const at::Tensor& b, double eps);
  std::optional<at::Tensor> (*rope_heads)(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                                          const at::Tensor& norm_weight, double eps);
  std::optional<at::Tensor> (*moe_permute)(const at::Tensor& x, const at::Tensor& order, int64_t k);
  std::optional<at::Tensor> (*moe_combine)(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top);
  std::optional<at::Tensor> (*cross_entropy_rows)(const at::Tensor& logits, const at::Tensor& targets,
                                                  int64_t ignore_index, bool write_gradient);
};

// The table the entry points use, or null. One per binary that links loom_ops (each plugin
// has its own copy of the static library, so each turns the kernels on for itself).
const KernelTable* installed();
void install(const KernelTable* table);

}  // namespace loom_ops::cuda_dispatch
