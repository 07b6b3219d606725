// loom/expert_parallel.hpp: what a mixture-of-experts model needs to spread its experts over
// the ranks of an expert-parallel group ([distributed] expert_parallel = E, ABI 1.12), as
// GShard (Lepikhin et al. 2020) and DeepSpeed-MoE do: the E ranks read different batches (they
// are data-parallel ranks); in each sparse layer every rank routes its own tokens, sends each
// (token, expert) row to the rank that computes that expert with one all-to-all, and gets the
// results back with a second. Rank r computes experts r * n/E .. (r + 1) * n/E - 1 of n.
//
// The rows a rank sends to each other rank differ in number; the all-to-all here moves equal
// chunks, so each chunk is padded to the largest count in the group (max_over), and the counts
// travel first (counts_exchange). Everything here is the plain computation for a group of one.
//
// A model that does this says so (loom::Model::expert_parallel() returns true); the host refuses
// expert parallelism for any other model.
#pragma once

#include <loom/sequence_parallel.hpp>
#include <loom/tensor_parallel.hpp>

namespace loom::expert_parallel {

struct Group {
  int64_t rank = 0, size = 1;
  Group() = default;
  explicit Group(const Context& ctx) : rank(ctx.expert_parallel_rank), size(ctx.expert_parallel_size) {}
  bool split() const { return size > 1; }
};

// (size * chunk, ...): chunk j to rank j; back, in rank order, what every rank sent this one.
// Differentiable: the gradient goes back the same way.
inline at::Tensor exchange(const at::Tensor& x, const Group& g) {
  return g.split() ? sequence_parallel::detail::Exchange::apply(x, 0, 0, g.size, LOOM_COLLECTIVE_GROUP_EXPERT) : x;
}

// The same without autograd (counts, indices).
inline at::Tensor counts_exchange(const at::Tensor& x, const Group& g) {
  return g.split() ? tensor_parallel::collective(LOOM_COLLECTIVE_ALL_TO_ALL, x, LOOM_COLLECTIVE_GROUP_EXPERT) : x;
}

// The elementwise maximum over the group (no autograd).
inline at::Tensor max_over(const at::Tensor& x, const Group& g) {
  return g.split() ? tensor_parallel::collective(LOOM_COLLECTIVE_ALL_REDUCE_MAX, x, LOOM_COLLECTIVE_GROUP_EXPERT) : x;
}

}  // namespace loom::expert_parallel
