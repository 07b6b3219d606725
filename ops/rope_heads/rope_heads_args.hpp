// rope_heads_args.hpp: what every path of rope_heads requires of its arguments (refused by name),
// and the dtype the reference gives.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/check_args.hpp>
#include <loom_ops/rotary.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

namespace loom_ops::rope_heads_detail {

inline void check(const Rope& rope, const at::Tensor& x, const at::Tensor& positions, const at::Tensor& w,
                  const char* op) {
  check_arg(rope.cos.defined() && rope.cos.dim() == 2 && rope.sin.sizes() == rope.cos.sizes(), op,
            "the rotary table must be built (Rope with cos and sin of (rows, D))");
  const int64_t rows = rope.cos.size(0), width = rope.cos.size(1);
  check_arg(x.dim() == 4 && x.size(3) == width && width % 2 == 0, op, [&] {
    return "x must be (B, T, H, D) with D = the table's width " + std::to_string(width) + ", got " +
           std::to_string(x.dim()) + " dimensions" + (x.dim() == 4 ? ", D = " + std::to_string(x.size(3)) : "");
  });
  if (positions.defined())
    check_arg(positions.dim() == 2 && positions.size(0) == x.size(0) && positions.size(1) == x.size(1) &&
                  positions.scalar_type() == at::kLong,
              op, "positions must be (B, T) int64, as x's first two dimensions");
  else
    check_arg(x.size(1) <= rows, op, [&] {
      return "x has " + std::to_string(x.size(1)) + " positions, the table " + std::to_string(rows) + " rows";
    });
  if (w.defined())
    check_arg(w.dim() == 1 && w.size(0) == width, op, [&] { return "norm_weight must be (D) with D = " + std::to_string(width); });
}

// The reference's dtype: x's, or x times norm_weight's (LibTorch's promotion) with a norm.
inline at::ScalarType result_type(const at::Tensor& x, const at::Tensor& w) {
  return w.defined() ? at::promote_types(x.scalar_type(), w.scalar_type()) : x.scalar_type();
}

// What forward keeps for backward, on every device. Autograd takes no undefined tensors: "no
// norm" (w) and "positions 0..T-1" travel as empty ones.
struct Saved {
  at::Tensor x, w, inverse_rms, cos, sin, positions;
  double eps = 0;
};

inline void save(torch::autograd::AutogradContext* ctx, const Saved& s) {
  ctx->save_for_backward({s.x, s.w, s.inverse_rms, s.cos, s.sin, s.positions});
  ctx->saved_data["eps"] = s.eps;
}

inline Saved restore(torch::autograd::AutogradContext* ctx) {
  const auto v = ctx->get_saved_variables();
  return {v[0], v[1], v[2], v[3], v[4], v[5], ctx->saved_data["eps"].toDouble()};
}

}  // namespace loom_ops::rope_heads_detail
