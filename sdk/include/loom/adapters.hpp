// loom/adapters.hpp: a linear layer that may carry a LoRA adapter (ABI 1.8; Hu et al. 2021,
// "LoRA: Low-Rank Adaptation of Large Language Models"). A model registers its linear weights
// with loom::Model::add_linear (loom/model.hpp); for the modules the manifest's [lora] targets
// that also registers A (rank, in) and B (out, rank), and the layer then computes
//   y = W x + b + (alpha / rank) B A dropout(x).
// B starts at zero, so an adapted model computes exactly what its base did until it trains.
#pragma once

#include <ATen/ATen.h>

#include <loom/tensor_parallel.hpp>

namespace loom {

// How a linear layer stores its weight: nn.Linear's (out, in), or (in, out) as Hugging Face's
// GPT-2 Conv1D does (PEFT's fan_in_fan_out).
enum class WeightLayout { out_in, in_out };

struct AdaptedLinear {
  at::Tensor weight;          // (out, in) or (in, out), as layout says
  at::Tensor lora_a, lora_b;  // (rank, in), (out, rank); undefined when the layer has no adapter
  double scale = 0.0;         // alpha / rank
  double dropout = 0.0;       // on the adapter's input while training
  WeightLayout layout = WeightLayout::out_in;
  // Under tensor parallelism (Model::add_split_linear): the dimension W is cut along (0:
  // column-parallel, B cut with it; 1: row-parallel, A cut with it; -1: not split) and the
  // group. The adapter matrix kept whole gets its gradient summed over the group
  // (tensor_parallel::enter), since each rank computes only its share of it.
  int64_t split_dim = -1;
  tensor_parallel::Group group;

  bool adapted() const { return lora_a.defined(); }

  // y: what the layer's base computed from x (W x + b, however the model computes it);
  // returns y plus the adapter's term, or y itself without an adapter. x: (..., in).
  at::Tensor adapt(const at::Tensor& y, const at::Tensor& x, bool training) const {
    if (!adapted()) return y;
    const at::Tensor in = training && dropout > 0.0 ? at::dropout(x, dropout, /*train=*/true) : x;
    // The scale goes on the rank-r side and B's product is added by one addmm: written as
    // y + (B A x) * scale, autograd keeps a whole (rows, out) product per layer until backward
    // (measured with PyTorch 1.13: 817 MiB peak against 601 this way, full fine-tuning 573).
    const at::Tensor a = split_dim == 0 ? tensor_parallel::enter(lora_a, group) : lora_a;
    const at::Tensor b = split_dim == 1 ? tensor_parallel::enter(lora_b, group) : lora_b;
    const at::Tensor low = at::linear(in.reshape({-1, in.size(-1)}), a) * scale;  // (rows, rank)
    return at::addmm(y.reshape({-1, y.size(-1)}), low, b.t()).view(y.sizes());
  }

  // For layers in nn.Linear's layout: x @ W^T (+ b) with the adapter's term. b may be undefined.
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& bias, bool training) const {
    return adapt(bias.defined() ? at::linear(x, weight, bias) : at::linear(x, weight), x, training);
  }
};

}  // namespace loom
