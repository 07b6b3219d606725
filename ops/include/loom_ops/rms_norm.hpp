// rms_norm.hpp: RMSNorm (Zhang & Sennrich 2019) as Hugging Face's LlamaRMSNorm computes it,
// which Llama, Mistral, Qwen2/3 and their MoE variants share: normalised in fp32 whatever x's
// dtype, cast back to it, then scaled by the weight,
//   w * (x / sqrt(mean(x^2) + eps))   over the last dimension.
// The order of the casts is part of the contract: the models match transformers' logits with
// it. On the CPU, contiguous fp32 x and w take fused loops (ops/add_rms_norm/'s, with no add: one
// pass a row forward, two backward); on CUDA, with the kernels switched on
// (<loom_ops/cuda_kernels.hpp>), add_rms_norm's kernels; anything else the reference's
// composition of LibTorch ops.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops {

// x: (..., D); w: (D). Differentiable. The result has the dtype of x times w (LibTorch's
// promotion), as in transformers.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);

namespace reference {
// The composition: (x.float() * rsqrt(mean(x.float()^2) + eps)).to(x's dtype) * w.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);
}  // namespace reference

namespace cuda {
// The same on CUDA tensors of float32, bfloat16 or float16 (x and w of one dtype, D at most
// 12288), by ops/add_rms_norm/add_rms_norm.cu's kernels with no add. Defined in loom_ops_cuda:
// link it to call this.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);
}  // namespace cuda

}  // namespace loom_ops
