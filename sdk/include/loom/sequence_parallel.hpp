// loom/sequence_parallel.hpp: what a model needs to train on pieces of long rows over the ranks
// of a sequence-parallel group ([distributed] sequence_parallel = S, ABI 1.11), in
// DeepSpeed-Ulysses' layout (Jacobs et al. 2023, arXiv:2309.14509).
//
// The host hands each rank piece ctx.sequence_parallel_rank of every row: positions
// rank * L/S .. (rank + 1) * L/S - 1 of rows of L, and every batch field cut the same way. All
// that works token by token (embeddings, norms, MLPs, the loss) runs on the piece as it is.
// Attention alone needs the whole row: around it, whole_rows() trades this rank's sequence piece
// of every head for the whole row of 1/S of the heads (one all-to-all), and pieces_of_rows()
// trades back. Each rank then attends over whole rows, causal masks and packed documents
// (gather_rows() on document_ids) exactly as in one process. S must divide the heads exchanged:
// a model with fewer key/value heads repeats them for their queries first (llama.cpp).
//
// A model that does this says so (loom::Model::sequence_parallel() returns true); the host
// refuses sequence parallelism for any other. Without it (Group::size 1) every function here
// is the identity.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include <loom/plugin.hpp>
#include <loom/tensor_parallel.hpp>
#include <loom/torch.hpp>

namespace loom::sequence_parallel {

struct Group {
  int64_t rank = 0, size = 1;
  Group() = default;
  explicit Group(const Context& ctx) : rank(ctx.sequence_parallel_rank), size(ctx.sequence_parallel_size) {}
  bool split() const { return size > 1; }
  // Where this rank's piece of rows of `piece` positions starts.
  int64_t start(int64_t piece) const { return rank * piece; }
};

namespace detail {
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x with dim `scatter` cut into size chunks, chunk j sent to rank j of `group`; what comes back
// from rank i is put, in rank order, along dim `gather`, which grows size times while `scatter`
// shrinks.
inline at::Tensor exchange(const at::Tensor& x, int64_t scatter, int64_t gather, int64_t size,
                           loom_collective_group group = LOOM_COLLECTIVE_GROUP_SEQUENCE) {
  if (x.size(scatter) % size != 0)
    throw Error("all-to-all: dimension " + std::to_string(scatter) + " of size " + std::to_string(x.size(scatter)) +
                " cannot be cut into " + std::to_string(size) + " pieces");
  const at::Tensor chunks = x.unflatten(scatter, {size, x.size(scatter) / size}).movedim(scatter, 0);  // (size, ...)
  const at::Tensor got = tensor_parallel::collective(LOOM_COLLECTIVE_ALL_TO_ALL, chunks, group);
  return got.movedim(0, gather).flatten(gather, gather + 1);
}

// Its backward is the exchange the other way (loom/expert_parallel.hpp uses it on its group).
struct Exchange : torch::autograd::Function<Exchange> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t scatter, int64_t gather, int64_t size,
                            int64_t group = LOOM_COLLECTIVE_GROUP_SEQUENCE) {
    ctx->saved_data["scatter"] = scatter;
    ctx->saved_data["gather"] = gather;
    ctx->saved_data["size"] = size;
    ctx->saved_data["group"] = group;
    return exchange(x, scatter, gather, size, static_cast<loom_collective_group>(group));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t scatter = ctx->saved_data["scatter"].toInt(), gather = ctx->saved_data["gather"].toInt();
    const auto group = static_cast<loom_collective_group>(ctx->saved_data["group"].toInt());
    return {exchange(grads[0], gather, scatter, ctx->saved_data["size"].toInt(), group), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};
}  // namespace detail

// (B, heads, L/S, D): every head of this rank's piece -> (B, heads/S, L, D): the whole rows of
// heads rank * heads/S .. (rank + 1) * heads/S - 1.
inline at::Tensor whole_rows(const at::Tensor& x, const Group& g) {
  return g.split() ? detail::Exchange::apply(x, 1, 2, g.size) : x;
}

// The inverse: (B, heads/S, L, D) -> (B, heads, L/S, D).
inline at::Tensor pieces_of_rows(const at::Tensor& x, const Group& g) {
  return g.split() ? detail::Exchange::apply(x, 2, 1, g.size) : x;
}

// (B, L/S) from every rank -> (B, L), in rank order; no gradient (document ids, positions).
inline at::Tensor gather_rows(const at::Tensor& x, const Group& g) {
  if (!g.split()) return x;
  return tensor_parallel::collective(LOOM_COLLECTIVE_ALL_GATHER, x.transpose(0, 1), LOOM_COLLECTIVE_GROUP_SEQUENCE)
      .transpose(0, 1)
      .contiguous();
}

}  // namespace loom::sequence_parallel
