// loom/tensor_parallel.hpp: the pieces a model needs to split its matrices over the ranks of a
// tensor-parallel group ([distributed] tensor_parallel = T, ABI 1.10), in Megatron-LM's layout
// (Shoeybi et al. 2019):
//
//   column-parallel  y_t = enter(x) W_t^T    W cut along its rows (outputs): each rank computes
//                                            its own heads or hidden units
//   row-parallel     y   = leave(h_t W_t^T)  W cut along its columns (inputs): the partial
//                                            products are summed over the group
//   vocabulary       embedding() and cross_entropy_sum() over a table cut along its rows
//
// enter() is the identity whose backward sums the gradient over the group; leave() sums over
// the group and passes the gradient through. A weight the model keeps whole but uses on its
// own piece of the activations (a per-head norm) goes through enter() too, so its gradient is
// the group's sum, the same on every rank, as the host requires of whole parameters.
//
// Register the pieces with Model::add_split_param (the whole tensor initialised as without
// tensor parallelism, so every layout starts from the same weights). Without tensor
// parallelism (Group::size 1) every function here is the plain computation.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include <loom/plugin.hpp>
#include <loom/torch.hpp>

namespace loom::tensor_parallel {

struct Group {
  int64_t rank = 0, size = 1;
  Group() = default;
  explicit Group(const Context& ctx) : rank(ctx.tensor_parallel_rank), size(ctx.tensor_parallel_size) {}
  bool split() const { return size > 1; }
};

// One collective through the host, no autograd. op: loom_collective_op; group: which of the
// model's groups (the sequence group needs a host of ABI 1.11, which any run that has one is).
inline at::Tensor collective(loom_collective_op op, const at::Tensor& x,
                             loom_collective_group group = LOOM_COLLECTIVE_GROUP_TENSOR) {
  const loom_host_api& api = host();
  if (!LOOM_STRUCT_HAS(&api, loom_host_api, tensor_parallel_collective) || api.tensor_parallel_collective == nullptr)
    throw Error("this host has no tensor-parallel collectives (it is older than Loom ABI 1.10)");
  const at::Tensor input = x.contiguous();
  at::Tensor out;
  loom_collective_args args{};
  args.struct_size = sizeof(args);
  args.op = op;
  args.group = group;
  args.input = handle(input);
  args.output = handle(out);
  check(api.tensor_parallel_collective(&args));
  return out;
}

namespace detail {
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct SumGradient : torch::autograd::Function<SumGradient> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x) { return x.view_as(x); }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {collective(LOOM_COLLECTIVE_ALL_REDUCE_SUM, grads[0])};
  }
};

struct SumForward : torch::autograd::Function<SumForward> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x) {
    return collective(LOOM_COLLECTIVE_ALL_REDUCE_SUM, x);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0]}; }
};

// (..., n) on each rank -> (..., size * n), the ranks' pieces in order; backward keeps this
// rank's piece of the gradient.
struct GatherLastDim : torch::autograd::Function<GatherLastDim> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t rank) {
    ctx->saved_data["rank"] = rank;
    ctx->saved_data["n"] = x.size(-1);
    const at::Tensor rows = collective(LOOM_COLLECTIVE_ALL_GATHER, x.movedim(-1, 0));  // (size * n, ...)
    return rows.movedim(0, -1).contiguous();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t rank = ctx->saved_data["rank"].toInt(), n = ctx->saved_data["n"].toInt();
    return {grads[0].narrow(-1, rank * n, n), at::Tensor()};
  }
};
}  // namespace detail

// Into a column-parallel region: x unchanged; its gradient summed over the group.
inline at::Tensor enter(const at::Tensor& x, const Group& g) { return g.split() ? detail::SumGradient::apply(x) : x; }

// Out of a row-parallel region: the sum of every rank's x; the gradient passes unchanged.
inline at::Tensor leave(const at::Tensor& x, const Group& g) { return g.split() ? detail::SumForward::apply(x) : x; }

// Every rank's last dimension side by side: logits (..., V / T) -> (..., V).
inline at::Tensor gather_last_dim(const at::Tensor& x, const Group& g) {
  return g.split() ? detail::GatherLastDim::apply(x, g.rank) : x;
}

// A lookup in a table cut along its rows: this rank's piece (V / T, C) holds the rows
// start .. start + V / T - 1. ids: any shape -> (..., C), the same on every rank.
// padding_idx (a row of the whole table, or -1): that row gets no gradient from the lookup, as
// torch.nn.Embedding's padding_idx (Hugging Face builds the Llama family's with pad_token_id).
inline at::Tensor embedding(const at::Tensor& piece, const at::Tensor& ids, const Group& g, int64_t padding_idx = -1) {
  if (!g.split()) return at::embedding(piece, ids, padding_idx);
  const int64_t rows = piece.size(0);
  const int64_t local_padding = padding_idx >= g.rank * rows && padding_idx < (g.rank + 1) * rows
                                    ? padding_idx - g.rank * rows : -1;
  const at::Tensor local = ids - g.rank * rows;
  const at::Tensor mine = local.ge(0).logical_and(local.lt(rows));
  const at::Tensor found =
      at::embedding(piece, local.clamp(0, rows - 1), local_padding) * mine.unsqueeze(-1).to(piece.scalar_type());
  return leave(found, g);
}

// The summed cross-entropy of logits cut along the vocabulary, never gathered: piece (N, V / T)
// holds the logits of tokens start .. start + V / T - 1; targets (N) (ignore_index: no loss).
// As softmax cross-entropy: log sum_v exp(z_v) - z_target, with the maximum taken out first;
// the maximum, the sum of exponentials and the target's logit are combined over the group.
// Computed in fp32. Returns a 0-dim tensor, the same on every rank.
inline at::Tensor cross_entropy_sum(const at::Tensor& piece, const at::Tensor& targets, const Group& g,
                                    int64_t ignore_index = LOOM_IGNORE_INDEX) {
  if (!g.split())
    return at::cross_entropy_loss(piece, targets, {}, at::Reduction::Sum, ignore_index);
  const at::Tensor z = piece.to(at::kFloat);                                            // (N, V/T)
  const at::Tensor top = collective(LOOM_COLLECTIVE_ALL_REDUCE_MAX, std::get<0>(z.detach().max(-1)));  // (N)
  const at::Tensor shifted = z - top.unsqueeze(-1);
  const at::Tensor sum_exp = leave(shifted.exp().sum(-1), g);                          // (N)
  const int64_t rows = piece.size(-1);
  const at::Tensor local = targets - g.rank * rows;
  const at::Tensor valid = targets.ne(ignore_index);
  const at::Tensor mine = local.ge(0).logical_and(local.lt(rows)).logical_and(valid);
  const at::Tensor picked = shifted.gather(-1, local.clamp(0, rows - 1).unsqueeze(-1)).squeeze(-1);  // (N)
  const at::Tensor target = leave(picked * mine.to(at::kFloat), g);                     // (N)
  return at::where(valid, sum_exp.log() - target, at::zeros_like(target)).sum();
}

}  // namespace loom::tensor_parallel
