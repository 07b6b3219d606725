#include "layers/moe.hpp"

#include <loom_ops/grouped_linear.hpp>
#include <loom_ops/moe_permutation.hpp>
#include <loom_ops/swiglu.hpp>

#include <algorithm>

namespace loom_gpt {

MoeNames::MoeNames(const std::string& prefix, bool mixtral) {
  const std::string block = prefix + (mixtral ? "block_sparse_moe." : "mlp.");
  router = block + "gate.weight";
  expert_ = block + "experts.";
  gate_ = mixtral ? ".w1.weight" : ".gate_proj.weight";
  up_ = mixtral ? ".w3.weight" : ".up_proj.weight";
  down_ = mixtral ? ".w2.weight" : ".down_proj.weight";
  shared_gate = block + "shared_expert.gate_proj.weight";
  shared_up = block + "shared_expert.up_proj.weight";
  shared_down = block + "shared_expert.down_proj.weight";
  shared_expert_gate = block + "shared_expert_gate.weight";
}

namespace {

namespace ep = loom::expert_parallel;

// The SwiGLU of w's experts on rows sorted by expert (counts: rows per expert of w).
at::Tensor experts_of(const MoeWeights& w, const at::Tensor& rows, const at::Tensor& counts) {
  if (rows.size(0) == 0) return at::zeros({0, w.down.front().size(0)}, rows.options());
  const at::Tensor h =
      loom_ops::swiglu(loom_ops::grouped_linear(rows, w.gate, counts), loom_ops::grouped_linear(rows, w.up, counts));
  return loom_ops::grouped_linear(h, w.down, counts);
}

// Rows (sorted by expert, counts per expert) computed by the ranks that own their experts:
// each rank's rows padded to the group's largest count go out in one all-to-all, this rank's
// experts run on what every rank sent it (regrouped by expert), and a second all-to-all brings
// the results back to the same places. The counts come to the host once per layer: they
// decide the shapes (on a GPU, one sync per sparse layer).
at::Tensor experts_over_group(const MoeWeights& w, const at::Tensor& rows, const at::Tensor& counts,
                              const ep::Group& g) {
  const int64_t E = counts.size(0), P = g.size, local = E / P, C = rows.size(1);
  const at::Tensor per_rank = counts.view({P, local});                          // (P, E/P): my rows per expert
  const at::Tensor sent_to = per_rank.sum(1).cpu().contiguous();                 // (P)
  const at::Tensor got = ep::counts_exchange(per_rank.contiguous(), g).cpu().contiguous();  // (P, E/P): rank i's rows for mine
  const int64_t cap = std::max<int64_t>(1, ep::max_over(sent_to.max().reshape({1}).to(counts.device()), g).item<int64_t>());
  const auto sent = sent_to.accessor<int64_t, 1>();
  const auto from = got.accessor<int64_t, 2>();
  // My sorted rows in the padded send buffer: rank j's at j * cap + 0 .. sent[j] - 1.
  std::vector<int64_t> out_place;
  for (int64_t j = 0; j < P; ++j)
    for (int64_t i = 0; i < sent[j]; ++i) out_place.push_back(j * cap + i);
  // What I received, regrouped by my experts: for expert e, rank i's rows of it, in rank order
  // (rank i sent its rows sorted by expert: expert e's start after its rows of the ones before).
  std::vector<int64_t> in_place, before(static_cast<size_t>(P), 0);
  for (int64_t e = 0; e < local; ++e)
    for (int64_t i = 0; i < P; ++i) {
      for (int64_t k = 0; k < from[i][e]; ++k) in_place.push_back(i * cap + before[static_cast<size_t>(i)] + k);
      before[static_cast<size_t>(i)] += from[i][e];
    }
  const at::Tensor out_index = at::tensor(out_place, at::kLong).to(rows.device());
  const at::Tensor in_index = at::tensor(in_place, at::kLong).to(rows.device());
  const at::Tensor padded = at::zeros({P * cap, C}, rows.options()).index_copy(0, out_index, rows);
  const at::Tensor received = ep::exchange(padded, g).index_select(0, in_index);          // (M, C)
  const at::Tensor done = experts_of(w, received, got.sum(0).to(counts.device()));
  const at::Tensor back = at::zeros({P * cap, C}, done.options()).index_copy(0, in_index, done);
  return ep::exchange(back, g).index_select(0, out_index);                                 // (N k, C)
}

}  // namespace

MoeOutput moe_mlp(const MoeWeights& w, const MoeSpec& spec, const at::Tensor& x, const ep::Group& group) {
  const int64_t C = x.size(-1), E = spec.experts, k = spec.top_k;
  const at::Tensor flat = x.reshape({-1, C});                                         // (N, C)
  MoeOutput out;
  out.router_logits = at::linear(flat, w.router);                                     // (N, E)
  const at::Tensor probs = at::softmax(out.router_logits, -1, at::kFloat);
  auto [top, chosen] = probs.topk(k, -1);                                             // (N, k) each
  if (spec.norm_topk_prob) top = top / top.sum(-1, /*keepdim=*/true);
  top = top.to(out.router_logits.scalar_type());
  out.chosen = chosen;
  // The (token, choice) pairs sorted by expert; pair p is token p / k's choice p % k.
  const at::Tensor experts = chosen.reshape({-1});                                    // (N k)
  const at::Tensor order = std::get<1>(experts.sort(std::optional<bool>(true), 0, false));  // (N k), stable
  const at::Tensor counts = loom_ops::tokens_per_expert(experts, E);                            // (E)
  const at::Tensor rows = loom_ops::moe_permute(flat, order, k);                      // (N k, C)
  const at::Tensor computed = group.split() ? experts_over_group(w, rows, counts, group) : experts_of(w, rows, counts);
  const at::ScalarType summed = at::result_type(computed, top);  // as computed * top would promote
  at::Tensor sum = loom_ops::moe_combine(computed.to(summed), order, top.to(summed));  // (N, C)
  if (w.shared_gate.defined()) {
    const at::Tensor shared =
        at::linear(loom_ops::swiglu(at::linear(flat, w.shared_gate), at::linear(flat, w.shared_up)), w.shared_down);
    sum = sum + at::sigmoid(at::linear(flat, w.shared_expert_gate)) * shared;
  }
  out.y = sum.view(x.sizes());
  return out;
}

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t experts, int64_t top_k,
                               const at::Tensor& mask) {
  const at::TensorOptions f32 = router_logits.front().options().dtype(at::kFloat);
  at::Tensor routed = at::zeros({experts}, f32), probability = at::zeros({experts}, f32), rows = at::zeros({}, f32);
  for (const at::Tensor& logits : router_logits) {
    const at::Tensor p = at::softmax(logits, -1).to(at::kFloat);                      // (N, E)
    const at::Tensor chosen = std::get<1>(p.topk(top_k, -1)).reshape({-1});           // (N k)
    const at::Tensor weight = mask.defined() ? mask.to(at::kFloat).repeat_interleave(top_k) : at::ones_like(chosen, f32);
    routed = routed + at::zeros({experts}, f32).scatter_add(0, chosen, weight);
    probability = probability + (mask.defined() ? p * mask.to(at::kFloat).unsqueeze(-1) : p).sum(0);
    rows = rows + (mask.defined() ? mask.to(at::kFloat).sum() : at::full({}, double(p.size(0)), f32));
  }
  return (routed / rows * (probability / rows)).sum() * static_cast<double>(experts);
}

}  // namespace loom_gpt
