// rms_norm_args.hpp: what every path of rms_norm requires of its arguments, refused by name.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/check_args.hpp>

#include <string>

namespace loom_ops::rms_norm_detail {

inline void check_shapes(const at::Tensor& x, const at::Tensor& w, const char* op) {
  check_arg(w.dim() == 1 && x.dim() >= 1 && x.size(-1) == w.size(0) && x.size(-1) > 0, op, [&] {
    return "w must be (D) with D = x.size(-1) (" + std::to_string(x.dim() ? x.size(-1) : 0) + "), D at least 1";
  });
}

}  // namespace loom_ops::rms_norm_detail
