#include <loom_ops/block_attention.hpp>
#include <loom_ops/check_args.hpp>

#include <cmath>
#include <string>

#include "kv_heads.hpp"

namespace loom_ops {
namespace {

using block_attention_detail::per_query_head;

void check_shapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  check_arg(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "attend_block", "q, k and v must be (B, heads, T, D)");
  check_arg(k.sizes() == v.sizes(), "attend_block", "k and v must have the same shape");
  check_arg(k.size(2) > 0, "attend_block", "a block must hold at least one key");
  check_arg(q.size(0) == k.size(0) && q.size(3) == k.size(3), "attend_block", "q, k and v must share B and D");
  check_arg(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "attend_block",
            [&] {
              return "the key/value heads (" + std::to_string(k.size(1)) + ") must divide the query heads (" +
                     std::to_string(q.size(1)) + ")";
            });
}

}  // namespace

BlockAttention attend_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                            double scale) {
  check_shapes(q, k, v);
  const int64_t H = q.size(1);
  const at::ScalarType wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor scores = at::matmul(q.to(wide), per_query_head(k, H).to(wide).transpose(-2, -1)) * scale;  // (B, H, T, S)
  if (bias.defined()) scores = scores + bias.to(wide);
  // Rows that see no key of the block go through the arithmetic on zeros and are masked after:
  // log-sum-exp and exp over a row of -inf alone would put NaN in forward or backward.
  const at::Tensor seen = at::isfinite(std::get<0>(scores.max(-1)));  // (B, H, T)
  const at::Tensor safe = at::where(seen.unsqueeze(-1), scores, at::zeros_like(scores));
  const at::Tensor lse = at::logsumexp(safe, -1);
  const at::Tensor weights = at::where(seen.unsqueeze(-1), at::exp(safe - lse.unsqueeze(-1)), at::zeros_like(safe));
  return {at::matmul(weights, per_query_head(v, H).to(wide)), at::where(seen, lse, at::full_like(lse, -INFINITY))};
}

BlockAttention merge_blocks(const BlockAttention& a, const BlockAttention& b) {
  check_arg(a.out.sizes() == b.out.sizes() && a.lse.sizes() == b.lse.sizes(), "merge_blocks",
            "both blocks must be for the same queries");
  // As in attend_block, rows neither block saw are computed on zeros and masked after.
  const at::Tensor seen = at::isfinite(a.lse) | at::isfinite(b.lse);
  const at::Tensor none = at::full_like(a.lse, -INFINITY);
  const auto safe = [&](const at::Tensor& lse) { return at::where(seen, lse, at::zeros_like(lse)); };
  const at::Tensor total = at::logaddexp(safe(a.lse), safe(b.lse));
  // A block's share exp(lse_block - lse): 0 where it saw nothing.
  const auto share = [&](const at::Tensor& lse) { return at::exp(at::where(seen, lse - total, none)).unsqueeze(-1); };
  return {share(a.lse) * a.out + share(b.lse) * b.out, at::where(seen, total, none)};
}

}  // namespace loom_ops
