// chunked_loss.hpp: the output layer and the token loss in one, over chunks of rows, so that
// the (N, V) logits never exist whole. Over GPT-2's 50k or Qwen's 152k vocabularies they are a
// step's largest activation: GPT-2 124M at batch 16 x 1024 holds 3.3 GB of fp32 logits, and
// as much again for their gradient. Each chunk's logits are made in the compute dtype, and
// cross_entropy_rows turns them into the rows' losses and writes their gradient over them;
// what is kept for backward is the gradient of the hidden rows (N, C) and of the weight (V, C),
// which backward only scales by the incoming gradient. The idea of Liger Kernel's fused linear
// cross-entropy (Hsu et al. 2024), written for LibTorch ops.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace loom_ops {

// Rows per chunk for a vocabulary of V, never under 1: on a GPU about 128M logits a chunk (up
// to 6 bytes each while it lives, in bf16: the logits, and while cross_entropy_rows takes its
// reference there, fp32 log-probabilities), elsewhere about 32M (4 bytes each in fp32: the
// gradient is written over the logits). On a GPU fewer, larger chunks add the (V, C) weight
// gradient into its fp32 sum fewer times: at 32M (25 chunks for GPT-2 at batch 16 x 1024)
// those sums moved 12 GB a step; on a CPU memory is the scarcer.
int64_t loss_chunk_rows(int64_t vocab, at::DeviceType device);

// sum over rows with targets[i] != ignore_index of -log softmax(hidden[i] weight^T)[targets[i]],
// as at::cross_entropy_loss(..., Sum, ignore_index) on the whole logits. hidden: (N, C) and
// weight: (V, C), both in the dtype the products run in (the caller casts for autocast);
// targets: (N) int64. Returns an fp32 scalar, differentiable once with respect to hidden and
// weight (the gradients are computed in forward when either requires one).
at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                        int64_t ignore_index, int64_t chunk_rows);

namespace reference {
// at::cross_entropy_loss(hidden weight^T, targets, Sum, ignore_index) over the whole logits,
// in fp32: what chunked_linear_cross_entropy must match, value and gradients.
at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                int64_t ignore_index);
}  // namespace reference

}  // namespace loom_ops
