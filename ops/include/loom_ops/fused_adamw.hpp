// fused_adamw.hpp: one AdamW step over a flat parameter buffer. On contiguous fp32 CPU
// buffers it is one pass over memory, split across LibTorch's intra-op threads: each element
// is read once (parameter, gradient, both moments, decay mask) and written once (parameter,
// moments), where the same update as tensor ops makes eight passes. On CUDA it is LibTorch's
// own fused kernel (at::_fused_adamw_, what torch.optim.AdamW(fused=True) runs) after one
// masked decay pass; other CPU buffers (bf16, non-contiguous) run the eight ops. Shared by the
// adamw plugin and tools/bench's hand_flat loop.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops {

struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  double bias1;       // 1 - beta1^step
  double bias2_sqrt;  // sqrt(1 - beta2^step)
  int64_t step;       // the step being taken, from 1: LibTorch's kernel derives bias1 and bias2_sqrt from it
};

// Room a path may need, kept between steps; each field is made on first use.
struct AdamWScratch {
  at::Tensor denom;       // the tensor-op path: p-shaped
  at::Tensor step_count;  // LibTorch's fused kernel: the step as a float32 scalar on p's device
};

// p -= lr * wd * p where decay_mask is 1; exp_avg, exp_avg_sq updated from grad; then
// p -= lr / bias1 * exp_avg / (sqrt(exp_avg_sq) / bias2_sqrt + eps), as torch.optim.AdamW.
// Every tensor has p's shape, dtype and device. Nothing is read back to the host.
void adamw_step(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                const at::Tensor& decay_mask, AdamWScratch& scratch, const AdamWStep& s);

// The same update as eight tensor ops (what adamw_step does on CPU where it cannot fuse).
void adamw_step_tensor_ops(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                           const at::Tensor& decay_mask, AdamWScratch& scratch, const AdamWStep& s);

// The same update through at::_fused_adamw_ (any device LibTorch has the kernel for: CUDA, and
// the CPU, where the tests hold it to the one-pass loop). The decay mask is applied first as
// its own pass, since the kernel decays every element alike.
void adamw_step_libtorch_fused(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                               const at::Tensor& decay_mask, AdamWScratch& scratch, const AdamWStep& s);

}  // namespace loom_ops
