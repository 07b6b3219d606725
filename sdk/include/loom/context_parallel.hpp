// loom/context_parallel.hpp: what a model needs to train on chunks of long rows over the ranks of
// a context-parallel group ([distributed] context_parallel = C, ABI 1.16), for ring attention
// (Liu et al. 2023, arXiv:2310.01889): each rank keeps its queries and passes its keys and values
// around the group, one neighbour per step, merging what it sees with an online softmax.
//
// The host cuts rows of L positions into 2C chunks of L/(2C) and hands rank r chunks r and
// 2C-1-r side by side, every batch field cut the same way: one chunk from each end, so that
// under a causal mask every rank has the same work (the layout Megatron-LM's context parallelism
// and Llama 3's training use). All that works token by token (embeddings, norms, MLPs, the loss)
// runs on the chunks as they are, given each token's place in the whole row (positions());
// attention alone needs the other ranks' keys and values, which shift() brings one rank at a
// time. Unlike Ulysses (loom/sequence_parallel.hpp) nothing limits C by the head count.
//
// A model that does this says so (loom::Model::context_parallel() returns true); the host refuses
// context parallelism for any other. Without it (Group::size 1) every function here is the
// identity, and positions() the plain 0 .. T-1.
#pragma once

#include <loom/plugin.hpp>
#include <loom/tensor_parallel.hpp>
#include <loom/torch.hpp>

namespace loom::context_parallel {

struct Group {
  int64_t rank = 0, size = 1;
  Group() = default;
  explicit Group(const Context& ctx) : rank(ctx.context_parallel_rank), size(ctx.context_parallel_size) {}
  static Group of(int64_t rank, int64_t size) {
    Group g;
    g.rank = rank;
    g.size = size;
    return g;
  }
  // The chunk (of 2 size) that half `half` (0 or 1) of rank `of`'s positions is.
  int64_t chunk(int64_t of, int64_t half) const { return half == 0 ? of : 2 * size - 1 - of; }
  bool split() const { return size > 1; }

  // Where in the whole row the `mine` positions rank `of` holds sit: (mine,) int64 on `device`,
  // chunk `of` then chunk 2C-1-`of`, each mine/2 long.
  at::Tensor positions(int64_t mine, int64_t of, const at::Device& device) const {
    const auto options = at::TensorOptions().dtype(at::kLong).device(device);
    if (!split()) return at::arange(mine, options);
    const int64_t length = mine / 2;
    const auto half = [&](int64_t h) { return at::arange(chunk(of, h) * length, (chunk(of, h) + 1) * length, options); };
    return at::cat({half(0), half(1)});
  }
  at::Tensor positions(int64_t mine, const at::Device& device) const { return positions(mine, rank, device); }
};

// What rank - 1 holds, of the same shape as x on every rank; after s calls a rank holds what
// rank - s started with. No autograd: ring attention runs its own backward, in which the keys'
// gradients go round the same way as the keys, one more step taking each home
// (plugins/models/transformer/layers/ring_attention.hpp).
inline at::Tensor shift(const at::Tensor& x, const Group& g) {
  if (!g.split()) return x;
  return tensor_parallel::collective(LOOM_COLLECTIVE_RING_SHIFT, x, LOOM_COLLECTIVE_GROUP_CONTEXT);
}

// (B, mine) from every rank -> (B, L), the whole rows in order; no gradient (document ids).
inline at::Tensor gather_rows(const at::Tensor& x, const Group& g) {
  if (!g.split()) return x;
  const int64_t mine = x.size(1);
  const at::Tensor by_rank = tensor_parallel::collective(LOOM_COLLECTIVE_ALL_GATHER, x.transpose(0, 1).contiguous(),
                                                         LOOM_COLLECTIVE_GROUP_CONTEXT);  // (C * mine, B)
  std::vector<at::Tensor> where;
  for (int64_t r = 0; r < g.size; ++r) where.push_back(g.positions(mine, r, x.device()));
  // Row j of by_rank sits at position where[j] of the whole row.
  const at::Tensor order = at::argsort(at::cat(where));
  return by_rank.index_select(0, order).transpose(0, 1).contiguous();
}

}  // namespace loom::context_parallel
