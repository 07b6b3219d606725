// add_layer_norm_args.hpp: what every path of add_layer_norm requires of its arguments (refused
// by name), and where both backwards start.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/check_args.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

namespace loom_ops::add_layer_norm_detail {

inline void check_shapes(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w, const at::Tensor& b,
                         const char* op) {
  check_arg(x.dim() >= 1 && x.sizes() == delta.sizes() && x.size(-1) > 0, op, [&] {
    return "x and delta must have one shape of rank 1 or more with rows of 1 element or more, got " +
           std::to_string(x.dim()) + " and " + std::to_string(delta.dim()) + " dimensions";
  });
  const auto row_wide = [&](const at::Tensor& t) { return t.dim() == 1 && t.size(0) == x.size(-1); };
  check_arg(row_wide(w) && (!b.defined() || row_wide(b)), op,
            [&] { return "w and b must be (D) with D = x.size(-1) (" + std::to_string(x.size(-1)) + ")"; });
}

// What forward kept (autograd takes no undefined tensors: "no bias" travels as an empty b) and
// the two outputs' gradients, in s's dtype and contiguous, or undefined.
struct Incoming {
  at::Tensor s, w, b, mean, rstd;
  at::Tensor ds_in, dy;
};

inline void save(torch::autograd::AutogradContext* ctx, const at::Tensor& s, const at::Tensor& w, const at::Tensor& b,
                 const at::Tensor& mean, const at::Tensor& rstd) {
  ctx->save_for_backward({s, w, b, mean, rstd});
}

inline Incoming incoming(torch::autograd::AutogradContext* ctx, const torch::autograd::variable_list& grads) {
  const auto v = ctx->get_saved_variables();
  Incoming in{v[0], v[1], v[2], v[3], v[4], {}, {}};
  const auto as_s = [&](const at::Tensor& g) { return g.defined() ? g.to(in.s.scalar_type()).contiguous() : g; };
  in.ds_in = as_s(grads[0]);
  in.dy = as_s(grads[1]);
  return in;
}

// Backward's return when y sends nothing back: s's gradient to x and delta alone.
inline torch::autograd::variable_list only_through_s(const Incoming& in) {
  return {in.ds_in, in.ds_in, at::Tensor(), at::Tensor(), at::Tensor()};
}

}  // namespace loom_ops::add_layer_norm_detail
