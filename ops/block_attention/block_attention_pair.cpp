// attend_block_forward and attend_block_backward: one block of ring attention without autograd.
// The CPU path is LibTorch's flash-attention kernel pair (at::_scaled_dot_product_flash_attention_
// for_cpu and its backward), which take the merged log-sum-exp in place of the block's own; other
// devices run the same arithmetic from the scores.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <loom_ops/block_attention.hpp>
#include <loom_ops/check_args.hpp>

#include "kv_heads.hpp"

#include <cmath>
#include <tuple>

namespace loom_ops {
namespace {

using block_attention_detail::per_kv_head;
using block_attention_detail::per_query_head;


bool fused_here(const at::Tensor& q) {
  const at::ScalarType t = q.scalar_type();
  return q.is_cpu() && (t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf);
}

// Rows of the block that see at least one key: (B or 1, H or 1, T) bool, or undefined when every
// row does (no bias: causal and open blocks always show a row a key).
at::Tensor rows_seeing(const BlockMask& mask) {
  if (!mask.bias.defined()) return {};
  at::Tensor seen = at::isfinite(mask.bias).any(-1);
  while (seen.dim() < 3) seen = seen.unsqueeze(0);
  return seen;
}

// The additive scores bias of the mask, (T, S) or broadcastable, in `dtype`; undefined for none.
at::Tensor bias_of(const BlockMask& mask, int64_t T, int64_t S, const at::TensorOptions& options) {
  if (mask.bias.defined()) return mask.bias.to(options.dtype());
  if (!mask.causal) return {};
  const at::Tensor above = at::ones({T, S}, options.dtype(at::kBool)).triu(1);
  return at::zeros({T, S}, options).masked_fill(above, -INFINITY);
}

void check_pair(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const BlockMask& mask) {
  check_arg(q.dim() == 4 && k.dim() == 4 && k.sizes() == v.sizes(), "attend_block_forward",
            "q must be (B, H, T, D) and k, v (B, K, S, D) of one shape");
  check_arg(q.size(0) == k.size(0) && q.size(3) == k.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
            "attend_block_forward", "q, k and v must share B and D, and K must divide H");
  check_arg(!mask.causal || (q.size(2) == k.size(2) && !mask.bias.defined()), "attend_block_forward",
            "a causal block is square and has no other bias");
}

void check_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const BlockMask& mask, const BlockAttention& all) {
  check_pair(q, k, v, mask);
  check_arg(grad_out.sizes() == q.sizes() && all.out.sizes() == q.sizes() && all.lse.sizes() == q.sizes().slice(0, 3),
            "attend_block_backward", "grad_out and the merged out must be q's shape, the merged lse (B, H, T)");
}

// Rows no block showed a key have no gradient; their lse is -inf, which neither the kernels nor
// exp(s - lse) may see (their scores are all -inf too: 0 keeps exp at 0).
at::Tensor finite_lse(const at::Tensor& lse) {
  return at::where(at::isfinite(lse), lse, at::zeros({}, lse.options()));
}

}  // namespace

BlockAttention attend_block_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const BlockMask& mask, double scale) {
  check_pair(q, k, v, mask);
  at::NoGradGuard no_grad;
  const int64_t H = q.size(1), T = q.size(2), S = k.size(2);
  const at::ScalarType wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  if (!fused_here(q)) return attend_block(q, k, v, bias_of(mask, T, S, q.options().dtype(wide)), scale);
  const at::Tensor bias = mask.bias.defined() ? mask.bias.to(q.scalar_type()) : at::Tensor();
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
      q, per_query_head(k, H), per_query_head(v, H), 0.0, mask.causal,
      bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, scale);
  out = out.to(wide);
  lse = lse.to(wide);
  const at::Tensor seen = rows_seeing(mask);
  if (seen.defined()) {  // the kernel gives such rows lse 0, which would weigh them in a merge
    lse = at::where(seen, lse, at::full({}, -INFINITY, lse.options()));
    out = at::where(seen.unsqueeze(-1), out, at::zeros({}, out.options()));
  }
  return {out, lse};
}

BlockGradients attend_block_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const BlockMask& mask, double scale,
                                     const BlockAttention& all) {
  if (!fused_here(q)) return reference::attend_block_backward(grad_out, q, k, v, mask, scale, all);
  check_backward(grad_out, q, k, v, mask, all);
  at::NoGradGuard no_grad;
  const int64_t H = q.size(1), K = k.size(1);
  const at::Tensor bias = mask.bias.defined() ? mask.bias.to(q.scalar_type()) : at::Tensor();
  auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      grad_out.to(q.scalar_type()), q, per_query_head(k, H), per_query_head(v, H), all.out.to(q.scalar_type()),
      finite_lse(all.lse).to(q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat), 0.0, mask.causal,
      bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, scale);
  return {dq, per_kv_head(dk, K), per_kv_head(dv, K)};
}

namespace reference {

BlockGradients attend_block_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const BlockMask& mask, double scale,
                                     const BlockAttention& all) {
  check_backward(grad_out, q, k, v, mask, all);
  at::NoGradGuard no_grad;
  const int64_t H = q.size(1), K = k.size(1), T = q.size(2), S = k.size(2);
  const at::Tensor kq = per_query_head(k, H), vq = per_query_head(v, H), lse = finite_lse(all.lse);
  // P = exp(s - lse), dV = P^T dO, dS = P (dO V^T - rowsum(dO * O)), dQ = dS K scale, dK = dS^T Q scale.
  const at::ScalarType wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor qw = q.to(wide), kw = kq.to(wide), vw = vq.to(wide), up = grad_out.to(wide);
  at::Tensor scores = at::matmul(qw, kw.transpose(-2, -1)) * scale;  // (B, H, T, S)
  const at::Tensor bias = bias_of(mask, T, S, qw.options());
  if (bias.defined()) scores = scores + bias;
  const at::Tensor p = at::exp(scores - lse.to(wide).unsqueeze(-1));  // hidden keys: exp(-inf) = 0
  const at::Tensor row_dot = (up * all.out.to(wide)).sum(-1, /*keepdim=*/true);     // (B, H, T, 1)
  const at::Tensor ds = p * (at::matmul(up, vw.transpose(-2, -1)) - row_dot);
  return {(at::matmul(ds, kw) * scale).to(q.scalar_type()),
          per_kv_head(at::matmul(ds.transpose(-2, -1), qw) * scale, K).to(k.scalar_type()),
          per_kv_head(at::matmul(p.transpose(-2, -1), up), K).to(v.scalar_type())};
}

}  // namespace reference
}  // namespace loom_ops
