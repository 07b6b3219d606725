#include <loom_ops/rms_norm.hpp>
#include <loom_ops/rope_heads.hpp>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

#include "../cpu_common/partial_tasks.hpp"
#include "../cuda_dispatch/kernel_table.hpp"
#include "rope_heads_args.hpp"
#include "rope_heads_cpu.hpp"

namespace loom_ops {
namespace {

// Rows a task at least: below it a thread costs more than it saves (LibTorch's 32K elements).
int64_t row_grain(int64_t d) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(d, 1)); }

// The loops' view of one call; the tensors outlive it. Empty w: no norm; empty positions: 0..T-1.
cpu::RopeHeadsArgs args_of(const at::Tensor& x, const at::Tensor& w, const at::Tensor& cos, const at::Tensor& sin,
                           const at::Tensor& positions, double eps) {
  cpu::RopeHeadsArgs a;
  a.x = x.data_ptr<float>();
  a.w = w.numel() ? w.data_ptr<float>() : nullptr;
  a.cos = cos.data_ptr<float>();
  a.sin = sin.data_ptr<float>();
  a.positions = positions.numel() ? positions.data_ptr<int64_t>() : nullptr;
  a.B = x.size(0), a.T = x.size(1), a.H = x.size(2), a.D = x.size(3);
  a.eps = static_cast<float>(eps);
  return a;
}

struct RopeHeadsCpu : torch::autograd::Function<RopeHeadsCpu> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions, double eps) {
    const int64_t rows = x.numel() / x.size(3);
    at::Tensor y = at::empty({x.size(0), x.size(2), x.size(1), x.size(3)}, x.options());
    at::Tensor inverse = at::empty({w.numel() ? rows : 0}, x.options());
    const cpu::RopeHeadsArgs a = args_of(x, w, cos, sin, positions, eps);
    float *py = y.data_ptr<float>(), *pr = inverse.data_ptr<float>();
    at::parallel_for(0, rows, row_grain(x.size(3)),
                     [&](int64_t begin, int64_t end) { cpu::rope_heads_forward(a, py, pr, begin, end); });
    rope_heads_detail::save(ctx, {x, w, inverse, cos, sin, positions, eps});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const rope_heads_detail::Saved saved = rope_heads_detail::restore(ctx);
    const at::Tensor &x = saved.x, &w = saved.w, &inverse = saved.inverse_rms;
    const cpu::RopeHeadsArgs a = args_of(x, w, saved.cos, saved.sin, saved.positions, saved.eps);
    const bool norm = a.w != nullptr;
    const at::Tensor dy = grads[0].to(at::kFloat).contiguous();
    const int64_t D = x.size(3), rows = x.numel() / D;
    // Each task sums its rows' share of dw into its own row of `partial`; their sum is dw.
    const int64_t tasks = norm ? cpu::partial_tasks(rows, D) : 1;
    at::Tensor dx = at::empty_like(x), partial = at::zeros({norm ? tasks : 0, D}, x.options());
    const float* pdy = dy.data_ptr<float>();
    const float* pr = inverse.data_ptr<float>();
    float *pdx = dx.data_ptr<float>(), *pdw = partial.data_ptr<float>();
    if (norm) {
      at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
        for (int64_t t = first; t < last; ++t)
          cpu::rope_heads_backward(a, pr, pdy, pdx, pdw + t * D, rows * t / tasks, rows * (t + 1) / tasks);
      });
    } else {
      at::parallel_for(0, rows, row_grain(D),
                       [&](int64_t begin, int64_t end) { cpu::rope_heads_backward(a, pr, pdy, pdx, nullptr, begin, end); });
    }
    return {dx, norm ? partial.sum(0) : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

bool fused_here(const at::Tensor& t) {
  return !t.defined() || (t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() &&
                          t.layout() == at::kStrided);
}

}  // namespace

at::Tensor rope_heads(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                      const at::Tensor& norm_weight, double eps) {
  rope_heads_detail::check(rope, x, positions, norm_weight, "rope_heads");
  if (x.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto y = kernels->rope_heads(rope, x, positions, norm_weight, eps)) return *std::move(y);
  const bool positions_here = !positions.defined() || (positions.device().is_cpu() && positions.is_contiguous());
  if (!fused_here(x) || !fused_here(norm_weight) || !fused_here(rope.cos) || !fused_here(rope.sin) || !positions_here)
    return reference::rope_heads(rope, x, positions, norm_weight, eps);
  if (positions.defined() && positions.numel() > 0)  // the loops index the table with them
    check_arg(positions.min().item<int64_t>() >= 0 && positions.max().item<int64_t>() < rope.cos.size(0), "rope_heads",
              [&] { return "positions must be rows of the table, 0 to " + std::to_string(rope.cos.size(0) - 1); });
  const at::Tensor no_norm = at::empty({0}, x.options()), rows_in_order = at::empty({0}, x.options().dtype(at::kLong));
  return RopeHeadsCpu::apply(x, norm_weight.defined() ? norm_weight : no_norm, rope.cos, rope.sin,
                             positions.defined() ? positions : rows_in_order, eps);
}

namespace reference {
at::Tensor rope_heads(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                      const at::Tensor& norm_weight, double eps) {
  rope_heads_detail::check(rope, x, positions, norm_weight, "reference::rope_heads");
  const at::Tensor normed = norm_weight.defined() ? reference::rms_norm(x, norm_weight, eps) : x;
  return rope.apply(normed.transpose(1, 2), positions);
}
}  // namespace reference

}  // namespace loom_ops
