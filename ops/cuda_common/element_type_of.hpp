// element_type_of.hpp: the ATen side of ElementType, for each op's *_cuda.cpp.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/check_args.hpp>

#include <string>

#include "element_type.hpp"

namespace loom_ops::cuda {

// The kernels' name for t's dtype; refused by name (op) unless float32, bfloat16 or float16.
inline ElementType element_type_of(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return ElementType::float32;
    case at::kBFloat16: return ElementType::bfloat16;
    case at::kHalf: return ElementType::float16;
    default: break;
  }
  refuse_arg(op, std::string("x must be float32, bfloat16 or float16, got ") + c10::toString(t.scalar_type()));
}

// Whether delta, added to x by a fused residual add, is autocast's narrower branch that the
// kernels take beside x: bfloat16 or float16 next to a float32 x (the sum is x's type, as ATen
// promotes it; elements.cuh dispatch_delta_type).
inline bool narrower_branch(const at::Tensor& x, const at::Tensor& delta) {
  return x.scalar_type() == at::kFloat && (delta.scalar_type() == at::kBFloat16 || delta.scalar_type() == at::kHalf);
}

// Refuses by name (op) an operand t of a fused residual add + norm that is not a CUDA tensor on
// x's device of x's dtype; delta may instead be x's narrower branch. names: the operands as the
// message lists them ("x, delta and w").
inline void check_residual_operand(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& t, const char* op,
                                   const char* names) {
  check_arg(t.is_cuda() && t.device() == x.device() &&
                (t.scalar_type() == x.scalar_type() || (&t == &delta && narrower_branch(x, delta))),
            op, [&] {
              return std::string(names) + " must be CUDA tensors of one dtype on one device (delta may be bfloat16 " +
                     "or float16 beside a float32 x), got " + t.device().str() + " " + c10::toString(t.scalar_type()) +
                     " beside " + x.device().str() + " " + c10::toString(x.scalar_type());
            });
}

}  // namespace loom_ops::cuda
