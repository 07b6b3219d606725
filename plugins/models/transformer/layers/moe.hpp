// moe.hpp: the sparse mixture-of-experts MLP of Qwen2-MoE, Qwen3-MoE and Mixtral, as
// transformers computes it, and its auxiliary load-balancing loss (Switch Transformer,
// Fedus et al. 2021, eqs. 4-6, in transformers' load_balancing_loss_func form).
//
// A router (E, C) scores each token; softmax in fp32, the top k experts, their weights
// renormalised when norm_topk_prob (Mixtral always), cast back to the activations' dtype. Each
// expert is a SwiGLU MLP of width Fe. Qwen2-MoE adds a shared expert on every token, scaled by
// sigmoid(shared_expert_gate x).
//
// The experts run as grouped matrix products (loom_ops::grouped_linear): the (token, expert)
// pairs are sorted by expert once, then each expert's contiguous rows meet its own weights. Shapes: N tokens, C width, E experts, k per token, Fe expert
// width.
#pragma once

#include <ATen/ATen.h>
#include <loom/expert_parallel.hpp>

#include <string>
#include <vector>

namespace loom_gpt {

struct MoeSpec {
  int64_t experts = 0;        // E; 0: no layer is sparse
  int64_t top_k = 0;          // k
  int64_t expert_hidden = 0;  // Fe
  int64_t shared_hidden = 0;  // Qwen2-MoE's shared expert width; 0: none
  bool norm_topk_prob = false;
  // The auxiliary loss joins the training loss, times aux_loss_coef, only when the config asks
  // for router logits (output_router_logits), as transformers does; it is reported either way.
  bool aux_loss_in_loss = false;
  double aux_loss_coef = 0.0;
  std::vector<bool> sparse;   // per layer: the MoE block (else the dense MLP)
  bool mixtral_names = false;  // block_sparse_moe.experts.j.w1/w3/w2 instead of mlp.experts.j.gate/up/down_proj
  bool any() const { return experts > 0; }
};

struct MoeWeights {
  at::Tensor router;                   // (E, C)
  // The experts this rank computes (all E, or its E/P under expert parallelism), in order.
  std::vector<at::Tensor> gate, up;    // (Fe, C) each
  std::vector<at::Tensor> down;        // (C, Fe) each
  at::Tensor shared_gate, shared_up;   // (Fs, C) each, or undefined
  at::Tensor shared_down;              // (C, Fs)
  at::Tensor shared_expert_gate;       // (1, C)
};

// The parameter names of layer `prefix` ("model.layers.3."), as the Hub stores them.
struct MoeNames {
  std::string router, shared_gate, shared_up, shared_down, shared_expert_gate;
  std::string gate(int64_t e) const { return expert_ + std::to_string(e) + gate_; }
  std::string up(int64_t e) const { return expert_ + std::to_string(e) + up_; }
  std::string down(int64_t e) const { return expert_ + std::to_string(e) + down_; }
  MoeNames(const std::string& prefix, bool mixtral);

 private:
  std::string expert_, gate_, up_, down_;
};

struct MoeOutput {
  at::Tensor y;              // (..., C)
  at::Tensor router_logits;  // (N, E), for the auxiliary loss
  at::Tensor chosen;         // (N, k) int64: each token's experts
};

// x: (..., C) -> the MoE MLP's output. Under expert parallelism (group.split()) this rank
// computes experts group.rank * E/P .. (group.rank + 1) * E/P - 1 (the ones w holds) for the
// rows of every rank of the group (loom/expert_parallel.hpp).
MoeOutput moe_mlp(const MoeWeights& w, const MoeSpec& spec, const at::Tensor& x,
                  const loom::expert_parallel::Group& group = {});

// transformers' load_balancing_loss_func over the router logits of every sparse layer:
// E * sum_e f_e P_e, f_e the share of (token, choice) pairs routed to e (summing to k), P_e the
// mean router probability of e, both over every layer's tokens together (rows where `mask` is
// 0 left out; mask: (N) or undefined). A 0-dim fp32 tensor.
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t experts, int64_t top_k,
                               const at::Tensor& mask);

}  // namespace loom_gpt
