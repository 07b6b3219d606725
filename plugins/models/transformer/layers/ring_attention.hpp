// ring_attention.hpp: causal attention for a rank of a context-parallel group
// (loom/context_parallel.hpp), shared by the `gpt` and `llama` components. Header-only, in the
// plugin-local namespace loom_gpt.
//
// The rank holds two chunks of every row (chunks r and 2C-1-r of 2C). Its queries stay; its keys
// and values go round the group, and each pair of (query chunk, key chunk) it meets is attended
// with its log-sum-exp and merged exactly (loom_ops/block_attention.hpp). A pair whose key chunk
// comes after the query chunk is hidden whole by the causal mask and skipped: each rank computes
// 2C + 1 of the 4C pairs it meets. Backward goes round again: each pair's gradients come from the
// merged output and log-sum-exp (flash attention's backward), so nothing of a pair is kept between
// forward and backward, and the keys' gradients travel with the keys, one more step taking them
// to their rank.
#pragma once

#include <ATen/ATen.h>
#include <loom/context_parallel.hpp>
#include <loom_ops/block_attention.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <cmath>
#include <functional>
#include <optional>

namespace loom_gpt {

// The additive bias of queries at whole-row positions query_at (T,) against keys at key_at (S,):
// -inf where the key comes after the query, lies in another document (documents: whole rows
// (B, L) of ids, or undefined) or falls out of a sliding window (window > 0: keys
// t - window + 1 .. t, as attention.hpp's causal_attention). (T, S), or (B, 1, T, S) with documents.
inline at::Tensor ring_block_bias(const at::Tensor& query_at, const at::Tensor& key_at, const at::Tensor& documents,
                                  int64_t window) {
  const at::Tensor q = query_at.unsqueeze(1), k = key_at.unsqueeze(0);  // (T, 1), (1, S)
  at::Tensor hidden = k > q;
  if (window > 0) hidden = hidden | (k <= q - window);
  if (documents.defined()) {
    const at::Tensor other = documents.index_select(1, query_at).unsqueeze(2) !=
                             documents.index_select(1, key_at).unsqueeze(1);  // (B, T, S)
    hidden = (hidden.unsqueeze(0) | other).unsqueeze(1);                      // (B, 1, T, S)
  }
  return at::zeros(hidden.sizes(), at::TensorOptions().device(query_at.device())).masked_fill(hidden, -INFINITY);
}

namespace ring_detail {

// What the ring needs besides the tensors.
struct Ring {
  loom::context_parallel::Group group;
  at::Tensor documents;  // (B, L) or undefined
  int64_t window = 0;    // 0: none
};

// The mask of query chunk `query` against key chunk `key` (chunk numbers of the whole row, each
// `length` positions), or nothing when the pair is hidden whole.
inline std::optional<loom_ops::BlockMask> pair_mask(const Ring& ring, int64_t query, int64_t key, int64_t length,
                                             const at::Device& device) {
  if (key > query) return std::nullopt;  // every key after every query
  // The nearest pair of positions is (query - key) * length - length + 1 apart.
  if (ring.window > 0 && (query - key - 1) * length + 1 >= ring.window) return std::nullopt;
  loom_ops::BlockMask mask;
  if (ring.documents.defined() || (ring.window > 0 && ring.window < (query - key + 1) * length)) {
    const auto options = at::TensorOptions().dtype(at::kLong).device(device);
    const auto positions = [&](int64_t chunk) { return at::arange(chunk * length, (chunk + 1) * length, options); };
    mask.bias = ring_block_bias(positions(query), positions(key), ring.documents, ring.window);
  } else {
    mask.causal = key == query;  // below the diagonal every key is seen
  }
  return mask;
}

// Every pair a rank meets that shows a query a key, in ring order: at step s = 0 .. C-1 the keys
// are rank r - s's, visit(query half, key half, mask) for each pair, and move() between steps.
inline void each_pair(const Ring& ring, int64_t length, const at::Device& device,
                      const std::function<void(int64_t, int64_t, const loom_ops::BlockMask&)>& visit,
                      const std::function<void()>& move) {
  const auto& g = ring.group;
  for (int64_t step = 0; step < g.size; ++step) {
    const int64_t from = (g.rank - step + g.size) % g.size;
    for (int64_t qh = 0; qh < 2; ++qh)
      for (int64_t kh = 0; kh < 2; ++kh)
        if (const auto mask = pair_mask(ring, g.chunk(g.rank, qh), g.chunk(from, kh), length, device))
          visit(qh, kh, *mask);
    if (step + 1 < g.size) move();
  }
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct RingAttention : torch::autograd::Function<RingAttention> {
  // q: (B, H, T, D), k, v: (B, K, T, D), T = 2 x the chunk length. Returns (B, H, T, D), q's dtype.
  // The ring is no autograd input (the document ids have no gradient).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const Ring& ring) {
    const int64_t length = q.size(2) / 2;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    const auto half = [&](const at::Tensor& x, int64_t h) { return x.narrow(2, h * length, length); };
    at::Tensor kv = at::stack({k, v});  // one message per step for both
    std::array<loom_ops::BlockAttention, 2> seen;
    each_pair(
        ring, length, q.device(),
        [&](int64_t qh, int64_t kh, const loom_ops::BlockMask& mask) {
          const loom_ops::BlockAttention block =
              loom_ops::attend_block_forward(half(q, qh), half(kv[0], kh), half(kv[1], kh), mask, scale);
          seen[qh] = seen[qh].out.defined() ? loom_ops::merge_blocks(seen[qh], block) : block;
        },
        [&] { kv = loom::context_parallel::shift(kv, ring.group); });
    const at::Tensor out = at::cat({seen[0].out, seen[1].out}, 2), lse = at::cat({seen[0].lse, seen[1].lse}, 2);
    ctx->save_for_backward({q, k, v, out, lse});
    if (ring.documents.defined()) ctx->saved_data["documents"] = ring.documents;
    ctx->saved_data["rank"] = ring.group.rank;
    ctx->saved_data["size"] = ring.group.size;
    ctx->saved_data["window"] = ring.window;
    return out.to(q.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    const loom_ops::BlockAttention all{saved[3], saved[4]};
    const Ring ring{loom::context_parallel::Group::of(ctx->saved_data["rank"].toInt(), ctx->saved_data["size"].toInt()),
                    ctx->saved_data.count("documents") ? ctx->saved_data["documents"].toTensor() : at::Tensor(),
                    ctx->saved_data["window"].toInt()};
    const int64_t length = q.size(2) / 2;
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    const auto half = [&](const at::Tensor& x, int64_t h) { return x.narrow(2, h * length, length); };
    const at::ScalarType wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    const at::Tensor up = grads[0];
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(wide));
    at::Tensor kv = at::stack({k, v});
    at::Tensor dkv = at::zeros(kv.sizes(), kv.options().dtype(wide));  // for the keys kv holds now
    each_pair(
        ring, length, q.device(),
        [&](int64_t qh, int64_t kh, const loom_ops::BlockMask& mask) {
          const loom_ops::BlockAttention merged{half(all.out, qh), half(all.lse, qh)};
          const loom_ops::BlockGradients g = loom_ops::attend_block_backward(
              half(up, qh), half(q, qh), half(kv[0], kh), half(kv[1], kh), mask, scale, merged);
          half(dq, qh).add_(g.q);
          half(dkv[0], kh).add_(g.k);
          half(dkv[1], kh).add_(g.v);
        },
        [&] {
          kv = loom::context_parallel::shift(kv, ring.group);
          dkv = loom::context_parallel::shift(dkv, ring.group);
        });
    // dkv is now for the keys of rank r + 1 (r - (C - 1)), the next step along the ring.
    dkv = loom::context_parallel::shift(dkv, ring.group);
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()), at::Tensor()};
  }
};

}  // namespace ring_detail

// q: (B, H, T, D), k, v: (B, K, T, D), this rank's T positions of every row (group.positions);
// K divides H. Returns (B, H, T, D) in q's dtype: attention over the whole rows' keys.
inline at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const loom::context_parallel::Group& group, const at::Tensor& documents,
                                 int64_t window) {
  return ring_detail::RingAttention::apply(q, k, v, ring_detail::Ring{group, documents, window});
}

}  // namespace loom_gpt
