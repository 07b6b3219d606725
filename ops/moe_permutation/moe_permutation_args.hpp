// moe_permutation_args.hpp: what every path of moe_permute and moe_combine requires of its
// arguments, refused by name.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/check_args.hpp>

#include <string>

namespace loom_ops::moe_permutation_detail {

inline void check_order(const at::Tensor& order, int64_t pairs, const at::Device& device, const char* op) {
  check_arg(order.dim() == 1 && order.scalar_type() == at::kLong && order.size(0) == pairs && order.device() == device,
            op, [&] {
              return "order must be (" + std::to_string(pairs) + ") int64 on " + device.str() + ", got " +
                     std::to_string(order.dim()) + " dimensions of " + c10::toString(order.scalar_type()) + " on " +
                     order.device().str();
            });
}

inline void check_permute(const at::Tensor& x, const at::Tensor& order, int64_t k, const char* op) {
  check_arg(x.dim() == 2 && k >= 1, op, [&] {
    return "x must be (N, C) and k at least 1, got " + std::to_string(x.dim()) + " dimensions and k " + std::to_string(k);
  });
  check_order(order, x.size(0) * k, x.device(), op);
}

inline void check_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top, const char* op) {
  check_arg(top.dim() == 2 && top.size(1) >= 1 && rows.dim() == 2 && rows.size(0) == top.size(0) * top.size(1) &&
                top.scalar_type() == rows.scalar_type() && top.device() == rows.device(),
            op, [&] {
              return "top must be (N, k) and rows (N k, C) of top's dtype and device, got top of " +
                     std::to_string(top.dim()) + " dimensions (" + c10::toString(top.scalar_type()) + ") and rows of " +
                     std::to_string(rows.dim()) + " (" + c10::toString(rows.scalar_type()) + ")";
            });
  check_order(order, rows.size(0), rows.device(), op);
}

}  // namespace loom_ops::moe_permutation_detail
