// loom_ops_cuda's side of the switch (kernel_table.hpp): which arguments each kernel takes, and
// the table that hands them over. The kernels' own checks (each op's *_cuda.cpp) stay the
// authority: what is asked here only keeps a call the kernel would refuse on the ATen path.
#include <loom_ops/add_layer_norm.hpp>
#include <loom_ops/add_rms_norm.hpp>
#include <loom_ops/cross_entropy_rows.hpp>
#include <loom_ops/cuda_kernels.hpp>
#include <loom_ops/gelu_tanh.hpp>
#include <loom_ops/moe_permutation.hpp>
#include <loom_ops/rms_norm.hpp>
#include <loom_ops/rope_heads.hpp>
#include <loom_ops/swiglu.hpp>

#include <initializer_list>

#include "../add_layer_norm/add_layer_norm_kernel.hpp"
#include "../add_rms_norm/add_rms_norm_kernel.hpp"
#include "../cuda_common/element_type_of.hpp"
#include "../moe_permutation/moe_permutation_math.hpp"
#include "../rope_heads/rope_heads_kernel.hpp"
#include "kernel_table.hpp"

namespace loom_ops::cuda_dispatch {
namespace {

bool kernel_dtype(const at::Tensor& t) {
  const at::ScalarType s = t.scalar_type();
  return s == at::kFloat || s == at::kBFloat16 || s == at::kHalf;
}

// Every tensor a CUDA tensor of the first one's device and dtype, which the kernels have. An
// undefined tensor (an optional argument left out) is skipped.
bool one_dtype_on_cuda(std::initializer_list<const at::Tensor*> tensors) {
  const at::Tensor& first = **tensors.begin();
  if (!first.is_cuda() || !kernel_dtype(first)) return false;
  for (const at::Tensor* t : tensors)
    if (t->defined() && (!t->is_cuda() || t->device() != first.device() || t->scalar_type() != first.scalar_type()))
      return false;
  return true;
}

std::optional<at::Tensor> gelu_tanh(const at::Tensor& x) {
  if (!one_dtype_on_cuda({&x})) return std::nullopt;
  return cuda::gelu_tanh(x);
}

std::optional<at::Tensor> swiglu(const at::Tensor& gate, const at::Tensor& up) {
  if (!one_dtype_on_cuda({&gate, &up})) return std::nullopt;
  return cuda::swiglu(gate, up);
}

std::optional<at::Tensor> rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  if (!one_dtype_on_cuda({&x, &w}) || x.size(-1) > cuda::kAddRmsNormMostColumns) return std::nullopt;
  return cuda::rms_norm(x, w, eps);
}

// A residual add's branch: x's dtype, or autocast's bfloat16/float16 beside a float32 x.
bool branch_beside(const at::Tensor& x, const at::Tensor& delta) {
  return delta.is_cuda() && delta.device() == x.device() &&
         (delta.scalar_type() == x.scalar_type() || cuda::narrower_branch(x, delta));
}

std::optional<TensorPair> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w, double eps) {
  if (!one_dtype_on_cuda({&x, &w}) || !branch_beside(x, delta) || x.size(-1) > cuda::kAddRmsNormMostColumns)
    return std::nullopt;
  return cuda::add_rms_norm(x, delta, w, eps);
}

std::optional<TensorPair> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                         const at::Tensor& b, double eps) {
  if (!one_dtype_on_cuda({&x, &w, &b}) || !branch_beside(x, delta) || x.size(-1) > cuda::kAddLayerNormMostColumns)
    return std::nullopt;
  return cuda::add_layer_norm(x, delta, w, b, eps);
}

std::optional<at::Tensor> rope_heads(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                                     const at::Tensor& norm_weight, double eps) {
  const bool table = rope.cos.is_cuda() && rope.cos.device() == x.device() && rope.sin.device() == x.device() &&
                     rope.cos.scalar_type() == at::kFloat && rope.sin.scalar_type() == at::kFloat;
  const bool norm = !norm_weight.defined() || (norm_weight.device() == x.device() &&
                                               (norm_weight.scalar_type() == x.scalar_type() ||
                                                norm_weight.scalar_type() == at::kFloat));
  const bool rows = !positions.defined() || positions.device() == x.device();
  if (!one_dtype_on_cuda({&x}) || !table || !norm || !rows || x.size(3) > cuda::kRopeHeadsMostChannels)
    return std::nullopt;
  return cuda::rope_heads(rope, x, positions, norm_weight, eps);
}

std::optional<at::Tensor> moe_permute(const at::Tensor& x, const at::Tensor& order, int64_t k) {
  if (!one_dtype_on_cuda({&x}) || k > moe_permutation_math::kMaxChoices) return std::nullopt;
  return cuda::moe_permute(x, order, k);
}

std::optional<at::Tensor> moe_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top) {
  if (top.size(1) > moe_permutation_math::kMaxChoices) return std::nullopt;
  if (one_dtype_on_cuda({&rows, &top})) return cuda::moe_combine(rows, order, top);
  // Autocast's mix: bfloat16 or float16 expert rows beside the router's float32 weights. The
  // reference multiplies them in float32 (type promotion) and sums into float32, as the kernel
  // does on the rows widened (exactly); the widening's backward rounds the rows' gradient from
  // float32 where the reference's product does.
  const bool narrow_rows = rows.scalar_type() == at::kBFloat16 || rows.scalar_type() == at::kHalf;
  if (narrow_rows && top.scalar_type() == at::kFloat && rows.is_cuda() && one_dtype_on_cuda({&top}) &&
      rows.device() == top.device())
    return cuda::moe_combine(rows.to(at::kFloat), order, top);
  return std::nullopt;
}

std::optional<at::Tensor> cross_entropy_rows(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                                             bool write_gradient) {
  if (!one_dtype_on_cuda({&logits})) return std::nullopt;
  return cuda::cross_entropy_rows(logits, targets, ignore_index, write_gradient);
}

constexpr KernelTable kKernels{gelu_tanh,  swiglu,      rms_norm,    add_rms_norm,      add_layer_norm,
                               rope_heads, moe_permute, moe_combine, cross_entropy_rows};

}  // namespace
}  // namespace loom_ops::cuda_dispatch

namespace loom_ops::cuda {
void use_kernels(bool on) { cuda_dispatch::install(on ? &cuda_dispatch::kKernels : nullptr); }
}  // namespace loom_ops::cuda
