#include <loom_ops/check_args.hpp>
#include <loom_ops/rms_norm.hpp>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

// The loops are add_rms_norm's with no add (delta null): one set of RMSNorm loops on the CPU.
#include "../add_rms_norm/add_rms_norm_cpu.hpp"
#include "../cpu_common/partial_tasks.hpp"
#include "../cuda_dispatch/kernel_table.hpp"
#include "rms_norm_args.hpp"

namespace loom_ops {
namespace {

using rms_norm_detail::check_shapes;

// Rows a task at least: below it a thread costs more than it saves (LibTorch's 32K elements).
int64_t row_grain(int64_t d) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(d, 1)); }

struct RmsNormCpu : torch::autograd::Function<RmsNormCpu> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            double eps) {
    const int64_t d = x.size(-1), rows = x.numel() / d;
    at::Tensor y = at::empty_like(x), inverse = at::empty({rows}, x.options());
    const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>();
    float *py = y.data_ptr<float>(), *pr = inverse.data_ptr<float>();
    at::parallel_for(0, rows, row_grain(d), [&](int64_t begin, int64_t end) {
      cpu::add_rms_norm_forward(px, nullptr, pw, nullptr, py, pr, begin, end, d, static_cast<float>(eps));
    });
    ctx->save_for_backward({x, w, inverse});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &inverse = saved[2];
    const at::Tensor dy = grads[0].to(at::kFloat).contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    // Each task sums its rows' share of dw into its own row of `partial`; their sum is dw.
    const int64_t tasks = cpu::partial_tasks(rows, d);
    at::Tensor dx = at::empty_like(x), partial = at::zeros({tasks, d}, x.options());
    const float *pdy = dy.data_ptr<float>(), *px = x.data_ptr<float>(), *pw = w.data_ptr<float>();
    const float* pr = inverse.data_ptr<float>();
    float *pdx = dx.data_ptr<float>(), *pdw = partial.data_ptr<float>();
    at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t)
        cpu::add_rms_norm_backward(pdy, nullptr, px, pw, pr, pdx, pdw + t * d, rows * t / tasks, rows * (t + 1) / tasks, d);
    });
    return {dx, partial.sum(0), at::Tensor()};
  }
};

bool fused_here(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.layout() == at::kStrided;
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  check_shapes(x, w, "rms_norm");
  if (x.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto y = kernels->rms_norm(x, w, eps)) return *std::move(y);
  if (!fused_here(x) || !fused_here(w)) return reference::rms_norm(x, w, eps);
  return RmsNormCpu::apply(x, w, eps);
}

namespace reference {
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  check_shapes(x, w, "reference::rms_norm");
  const at::Tensor x32 = x.to(at::kFloat);
  return (x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps)).to(x.scalar_type()) * w;
}
}  // namespace reference

}  // namespace loom_ops
