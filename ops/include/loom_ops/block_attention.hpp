// block_attention.hpp: attention over one block of keys at a time, with each query row's
// log-sum-exp of scores, and the exact merge of two blocks' results: the arithmetic of ring
// attention (Liu et al. 2023, arXiv:2310.01889) and of flash attention's outer loop, where a
// rank sees the keys and values of the sequence one block after another and never all at once.
//
// For one query row with scores s_j = q k_j^T * scale + bias_j over a block of keys,
//   lse = log sum_j exp(s_j),  out = sum_j exp(s_j - lse) v_j,
// and two blocks a, b of the same row combine exactly:
//   lse = log(exp(lse_a) + exp(lse_b)),  out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b.
// A row that sees no key of a block (every bias -inf: causal rows before the block) has
// lse = -inf and out = 0 there, and contributes nothing to the merge. Both are LibTorch ops,
// differentiable (autograd carries the gradient through lse), in the inputs' dtype with the
// scores and lse in fp32.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops {

struct BlockAttention {
  at::Tensor out;  // (B, H, T, D), fp32
  at::Tensor lse;  // (B, H, T), fp32; -inf where the row saw no key
};

// q: (B, H, T, D); k, v: (B, K, S, D) with K dividing H (grouped-query: query head h reads
// key/value head h / (H / K)); bias: additive, broadcastable to (B, H, T, S) ((T, S) for a causal
// block), -inf where a query may not see a key; undefined for none. scale: usually 1/sqrt(D).
BlockAttention attend_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                            double scale);

// The attention over the keys of a and b together, from a and b.
BlockAttention merge_blocks(const BlockAttention& a, const BlockAttention& b);

// Which keys of a block each query sees, for the pair below: every key; causal, for a block of
// the queries' own positions (key i seen by query t when i <= t, the block square); or an
// additive bias broadcastable to (B, H, T, S), -inf where hidden.
struct BlockMask {
  bool causal = false;
  at::Tensor bias;  // undefined: none
};

// One block's forward and backward without autograd, for a caller that runs its own backward
// over many blocks (ring attention, whose merged result only it holds). On the CPU both go
// through LibTorch's fused flash-attention kernels, which keep no (T, S) scores; elsewhere through
// attend_block's arithmetic. Forward: as attend_block (rows that see no key: lse -inf, out 0).
BlockAttention attend_block_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const BlockMask& mask, double scale);

struct BlockGradients {
  at::Tensor q, k, v;  // of q's, k's and v's shapes and dtypes
};

// The gradients through this block of the rows' attention over every block, given that merged
// attention (all: merge_blocks' out and lse over all the blocks) and its gradient grad_out: flash
// attention's backward (Dao et al. 2022) with the merged lse in place of the block's own, so that
// the blocks' gradients sum to the whole attention's.
BlockGradients attend_block_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const BlockMask& mask, double scale,
                                     const BlockAttention& all);

namespace reference {
// softmax(q k^T * scale + bias) v over all keys at once (LibTorch's math), fp32 out: what
// attend_block over any split of the keys, merged, must give.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                     double scale);
// attend_block_backward's arithmetic from the (T, S) scores, in fp32 (double for double):
// what devices without the fused kernels run, and what the CPU's kernels must give.
BlockGradients attend_block_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const BlockMask& mask, double scale,
                                     const BlockAttention& all);
}  // namespace reference

}  // namespace loom_ops
