// fused_adamw.hpp: one AdamW step over a flat parameter buffer. On contiguous fp32 CPU
// buffers it is one pass over memory, split across LibTorch's intra-op threads: each element
// is read once (parameter, gradient, both moments, decay mask) and written once (parameter,
// moments), where the same update as tensor ops makes eight passes. Elsewhere (CUDA, other
// dtypes) it runs those eight ops. Shared by the adamw plugin and tools/bench's hand_flat loop.
#pragma once

#include <ATen/ATen.h>

namespace loom_adamw {

struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  double bias1;       // 1 - beta1^step
  double bias2_sqrt;  // sqrt(1 - beta2^step)
};

// p -= lr * wd * p where decay_mask is 1; exp_avg, exp_avg_sq updated from grad; then
// p -= lr / bias1 * exp_avg / (sqrt(exp_avg_sq) / bias2_sqrt + eps), as torch.optim.AdamW.
// Every tensor has p's shape, dtype and device. scratch: p-shaped room for the tensor-op path,
// allocated there on first use when undefined (the fused path needs none).
void adamw_step(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                const at::Tensor& decay_mask, at::Tensor& scratch, const AdamWStep& s);

// The same update as eight tensor ops (what adamw_step does where it cannot fuse).
void adamw_step_tensor_ops(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                           const at::Tensor& decay_mask, at::Tensor& scratch, const AdamWStep& s);

}  // namespace loom_adamw
