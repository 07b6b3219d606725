// swiglu_shapes.hpp: what every path of swiglu requires of its arguments, refused by name.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/check_args.hpp>

#include <string>

namespace loom_ops::swiglu_detail {

inline void check_pair(const at::Tensor& gate, const at::Tensor& up, const char* op) {
  check_arg(gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type() && gate.device() == up.device(), op,
            [&] {
              return "gate and up must have one shape, dtype and device, got " + std::to_string(gate.dim()) +
                     " and " + std::to_string(up.dim()) + " dimensions, " + c10::toString(gate.scalar_type()) +
                     " and " + c10::toString(up.scalar_type()) + ", " + gate.device().str() + " and " +
                     up.device().str();
            });
}

}  // namespace loom_ops::swiglu_detail
