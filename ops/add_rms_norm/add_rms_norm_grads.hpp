// add_rms_norm_grads.hpp: where both backwards of the residual add + RMSNorm (the CPU loops' and
// the CUDA kernels') start: what forward saved, and the two outputs' gradients.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace loom_ops::add_rms_norm_detail {

struct Incoming {
  at::Tensor s, w, inverse_rms;  // saved by forward, in this order
  at::Tensor ds_in;  // the gradient of s from its other uses, in s's dtype and contiguous, or undefined
  at::Tensor dy;     // the gradient of y, the same way, or undefined (then only ds_in flows back)
};

inline Incoming incoming(torch::autograd::AutogradContext* ctx, const torch::autograd::variable_list& grads) {
  const auto saved = ctx->get_saved_variables();
  Incoming in{saved[0], saved[1], saved[2], {}, {}};
  const auto as_s = [&](const at::Tensor& g) { return g.defined() ? g.to(in.s.scalar_type()).contiguous() : g; };
  in.ds_in = as_s(grads[0]);
  in.dy = as_s(grads[1]);
  return in;
}

}  // namespace loom_ops::add_rms_norm_detail
