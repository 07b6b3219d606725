#include <loom_ops/block_attention.hpp>

#include "kv_heads.hpp"

namespace loom_ops::reference {

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                     double scale) {
  const int64_t H = q.size(1);
  const at::ScalarType wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor scores = at::matmul(q.to(wide), block_attention_detail::per_query_head(k, H).to(wide).transpose(-2, -1)) * scale;
  if (bias.defined()) scores = scores + bias.to(wide);
  return at::matmul(at::softmax(scores, -1), block_attention_detail::per_query_head(v, H).to(wide));
}

}  // namespace loom_ops::reference
