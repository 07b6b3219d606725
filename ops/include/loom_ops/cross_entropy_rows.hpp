// cross_entropy_rows.hpp: the token loss of one chunk of logits and, in the same passes, the
// logits' gradient written over them: what chunked_linear_cross_entropy runs between its
// products. For row i of logits (n, V) and its target t_i, in fp32 whatever the logits' dtype:
// loss_i = logsumexp(logits_i) - logits_i[t_i]; with the gradient asked for, logits_i becomes
// softmax(logits_i) - one_hot(t_i), each element rounded once to the dtype. A row whose target
// is ignore_index counts 0 and becomes zeros, so the products after it need no mask.
// The composition (the reference) writes fp32 (n, V) log-probabilities and reads them back;
// the fused path reads the logits twice (their maximum and sum of exponentials, then the
// gradient) and writes them once. On the CPU, contiguous fp32 logits take fused loops (glibc's
// vector exp); anything else the reference. The CUDA kernel (cuda::cross_entropy_rows, in
// loom_ops_cuda) is called by name only until tools/device-check has held it to the reference
// on a GPU and measured it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace loom_ops {

// logits: (n, V), contiguous; targets: (n) int64, each in [0, V) or ignore_index, on the
// logits' device. Returns the (n) fp32 losses. With write_gradient the logits hold the gradient
// on return; without, they are left as they were. No autograd: the caller (a chunked loss)
// forms its own gradients from what is written.
at::Tensor cross_entropy_rows(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                              bool write_gradient);

namespace reference {
// at::log_softmax into fp32, gather, then exp and scatter into the logits: the composition the
// chunked loss ran before, any dtype and device (double logits: in double, double losses).
at::Tensor cross_entropy_rows(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                              bool write_gradient);
}  // namespace reference

namespace cuda {
// The same on CUDA logits of float32, bfloat16 or float16 (ops/cross_entropy_rows/
// cross_entropy_rows.cu: one block a row, fp32 math; a target outside [0, V) traps). Defined in
// loom_ops_cuda: link it to call this.
at::Tensor cross_entropy_rows(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                              bool write_gradient);
}  // namespace cuda

}  // namespace loom_ops
