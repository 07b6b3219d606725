// kv_heads.hpp: grouped-query heads for block attention's files: key/value heads read by several
// query heads, and their gradients summed back. Private to ops/block_attention.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops::block_attention_detail {

// (B, K, S, D) -> (B, H, S, D): key/value head h / (H / K) for query head h.
inline at::Tensor per_query_head(const at::Tensor& x, int64_t heads) {
  return x.size(1) == heads ? x : x.repeat_interleave(heads / x.size(1), 1);
}

// (B, H, S, D) gradients of the repeated heads -> (B, K, S, D), each key/value head's summed.
inline at::Tensor per_kv_head(const at::Tensor& grad, int64_t kv_heads) {
  const int64_t H = grad.size(1);
  return H == kv_heads ? grad : grad.unflatten(1, {kv_heads, H / kv_heads}).sum(2);
}

}  // namespace loom_ops::block_attention_detail
