#include <loom_ops/cross_entropy_rows.hpp>

#include <ATen/Parallel.h>
#include <loom_ops/check_args.hpp>

#include <algorithm>
#include <string>

#include "../cuda_dispatch/kernel_table.hpp"
#include "cross_entropy_rows_args.hpp"
#include "cross_entropy_rows_cpu.hpp"

namespace loom_ops {
namespace {

constexpr const char* kOp = "cross_entropy_rows";

bool fused_here(const at::Tensor& logits) {
  return logits.device().is_cpu() && logits.scalar_type() == at::kFloat && logits.layout() == at::kStrided;
}

// The loops index rows with the targets: each is checked before any of them runs.
void check_targets(const int64_t* t, int64_t n, int64_t V, int64_t ignore_index) {
  for (int64_t i = 0; i < n; ++i)
    check_arg(t[i] == ignore_index || (t[i] >= 0 && t[i] < V), kOp, [&] {
      return "target " + std::to_string(t[i]) + " of row " + std::to_string(i) + " is outside [0, " + std::to_string(V) +
             ") and is not ignore_index (" + std::to_string(ignore_index) + ")";
    });
}

}  // namespace

at::Tensor cross_entropy_rows(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                              bool write_gradient) {
  cross_entropy_rows_detail::check_rows(logits, targets, kOp);
  if (logits.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto loss = kernels->cross_entropy_rows(logits, targets, ignore_index, write_gradient)) return *std::move(loss);
  if (!fused_here(logits)) return reference::cross_entropy_rows(logits, targets, ignore_index, write_gradient);
  const int64_t n = logits.size(0), V = logits.size(1);
  const at::Tensor t = targets.contiguous();
  const int64_t* pt = t.const_data_ptr<int64_t>();
  check_targets(pt, n, V, ignore_index);
  at::Tensor loss = at::empty({n}, logits.options());
  float *x = logits.mutable_data_ptr<float>(), *out = loss.mutable_data_ptr<float>();
  // 32K values a task, LibTorch's own elementwise grain: a chunk of a few rows stays on one thread.
  at::parallel_for(0, n, std::max<int64_t>(1, 32768 / V), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* row = x + i * V;
      if (pt[i] == ignore_index) {
        out[i] = 0.0f;
        if (write_gradient) std::fill(row, row + V, 0.0f);
      } else {
        out[i] = cpu::cross_entropy_row(row, V, pt[i], write_gradient);
      }
    }
  });
  return loss;
}

}  // namespace loom_ops
