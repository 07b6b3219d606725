#include <loom_ops/add_rms_norm.hpp>
#include <loom_ops/check_args.hpp>
#include <loom_ops/rms_norm.hpp>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

#include "../cpu_common/partial_tasks.hpp"
#include "../cuda_dispatch/kernel_table.hpp"
#include "add_rms_norm_cpu.hpp"
#include "add_rms_norm_grads.hpp"

namespace loom_ops {
namespace {

void check_shapes(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w, const char* op) {
  check_arg(x.dim() >= 1 && x.sizes() == delta.sizes() && x.size(-1) > 0, op, [&] {
    return "x and delta must have one shape of rank 1 or more with rows of 1 element or more, got " +
           std::to_string(x.dim()) + " and " + std::to_string(delta.dim()) + " dimensions";
  });
  check_arg(w.dim() == 1 && w.size(0) == x.size(-1), op,
            [&] { return "w must be (D) with D = x.size(-1) (" + std::to_string(x.size(-1)) + ")"; });
}

// Rows a task at least: below it a thread costs more than it saves (LibTorch's 32K elements).
int64_t row_grain(int64_t d) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(d, 1)); }

struct AddRmsNormCpu : torch::autograd::Function<AddRmsNormCpu> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& delta, const at::Tensor& w, double eps) {
    const int64_t d = x.size(-1), rows = x.numel() / d;
    at::Tensor s = at::empty_like(x), y = at::empty_like(x), inverse = at::empty({rows}, x.options());
    const float *px = x.data_ptr<float>(), *pd = delta.data_ptr<float>(), *pw = w.data_ptr<float>();
    float *ps = s.data_ptr<float>(), *py = y.data_ptr<float>(), *pr = inverse.data_ptr<float>();
    at::parallel_for(0, rows, row_grain(d), [&](int64_t begin, int64_t end) {
      cpu::add_rms_norm_forward(px, pd, pw, ps, py, pr, begin, end, d, static_cast<float>(eps));
    });
    ctx->save_for_backward({s, w, inverse});
    return {s, y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const add_rms_norm_detail::Incoming in = add_rms_norm_detail::incoming(ctx, grads);
    if (!in.dy.defined()) return {in.ds_in, in.ds_in, at::Tensor(), at::Tensor()};
    const at::Tensor &s = in.s, &w = in.w, &inverse = in.inverse_rms, &ds_in = in.ds_in, &dy = in.dy;
    const int64_t d = s.size(-1), rows = s.numel() / d;
    // Each task sums its rows' share of dw into its own row of `partial`; their sum is dw.
    const int64_t tasks = cpu::partial_tasks(rows, d);
    at::Tensor ds = at::empty_like(s), partial = at::zeros({tasks, d}, s.options());
    const float *pdy = dy.data_ptr<float>(), *pin = ds_in.defined() ? ds_in.data_ptr<float>() : nullptr;
    const float *ps = s.data_ptr<float>(), *pw = w.data_ptr<float>(), *pr = inverse.data_ptr<float>();
    float *pds = ds.data_ptr<float>(), *pdw = partial.data_ptr<float>();
    at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t)
        cpu::add_rms_norm_backward(pdy, pin, ps, pw, pr, pds, pdw + t * d, rows * t / tasks, rows * (t + 1) / tasks, d);
    });
    return {ds, ds, partial.sum(0), at::Tensor()};
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                               double eps) {
  check_shapes(x, delta, w, "add_rms_norm");
  if (x.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto out = kernels->add_rms_norm(x, delta, w, eps)) return *std::move(out);
  const auto fused = [](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.layout() == at::kStrided;
  };
  if (!fused(x) || !fused(delta) || !fused(w)) return reference::add_rms_norm(x, delta, w, eps);
  const torch::autograd::variable_list out = AddRmsNormCpu::apply(x, delta, w, eps);
  return {out[0], out[1]};
}

namespace reference {
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                               double eps) {
  check_shapes(x, delta, w, "reference::add_rms_norm");
  const at::Tensor s = x + delta;
  return {s, reference::rms_norm(s, w, eps)};
}
}  // namespace reference

}  // namespace loom_ops
