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

}  // namespace loom_ops::cuda
