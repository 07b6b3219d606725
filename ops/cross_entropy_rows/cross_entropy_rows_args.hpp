// cross_entropy_rows_args.hpp: what every path of cross_entropy_rows requires of its arguments,
// refused by name.
#pragma once

#include <ATen/ATen.h>
#include <loom_ops/check_args.hpp>

#include <string>

namespace loom_ops::cross_entropy_rows_detail {

inline void check_rows(const at::Tensor& logits, const at::Tensor& targets, const char* op) {
  check_arg(logits.dim() == 2 && logits.is_contiguous() && logits.size(1) >= 1, op, [&] {
    return "logits must be (n, V) contiguous with V at least 1, got " + std::to_string(logits.dim()) + " dimensions" +
           (logits.is_contiguous() ? "" : ", not contiguous");
  });
  check_arg(targets.dim() == 1 && targets.scalar_type() == at::kLong && targets.size(0) == logits.size(0) &&
                targets.device() == logits.device(),
            op, [&] {
              return "targets must be (" + std::to_string(logits.size(0)) + ") int64 on " + logits.device().str() +
                     ", got " + std::to_string(targets.dim()) + " dimensions of " + c10::toString(targets.scalar_type()) +
                     " on " + targets.device().str();
            });
}

}  // namespace loom_ops::cross_entropy_rows_detail
