#include <loom_ops/add_layer_norm.hpp>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "../cpu_common/partial_tasks.hpp"
#include "../cuda_dispatch/kernel_table.hpp"
#include "add_layer_norm_args.hpp"
#include "add_layer_norm_cpu.hpp"

namespace loom_ops {
namespace {

namespace detail = add_layer_norm_detail;

// Rows a task at least: below it a thread costs more than it saves (LibTorch's 32K elements).
int64_t row_grain(int64_t d) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(d, 1)); }

struct AddLayerNormCpu : torch::autograd::Function<AddLayerNormCpu> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& delta, const at::Tensor& w, const at::Tensor& b,
                                                double eps) {
    const int64_t d = x.size(-1), rows = x.numel() / d;
    at::Tensor s = at::empty_like(x), y = at::empty_like(x);
    at::Tensor mean = at::empty({rows}, x.options()), rstd = at::empty({rows}, x.options());
    const float *px = x.data_ptr<float>(), *pd = delta.data_ptr<float>(), *pw = w.data_ptr<float>();
    const float* pb = b.numel() ? b.data_ptr<float>() : nullptr;
    float *ps = s.data_ptr<float>(), *py = y.data_ptr<float>(), *pm = mean.data_ptr<float>(), *pr = rstd.data_ptr<float>();
    at::parallel_for(0, rows, row_grain(d), [&](int64_t begin, int64_t end) {
      cpu::add_layer_norm_forward(px, pd, pw, pb, ps, py, pm, pr, begin, end, d, static_cast<float>(eps));
    });
    detail::save(ctx, s, w, b, mean, rstd);
    return {s, y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const detail::Incoming in = detail::incoming(ctx, grads);
    if (!in.dy.defined()) return detail::only_through_s(in);
    const int64_t d = in.s.size(-1), rows = in.s.numel() / d;
    // Each task sums its rows' share of dw and db into its own rows of `partial`; their sums are dw and db.
    const int64_t tasks = cpu::partial_tasks(rows, d);
    // Nothing asks for w's or b's gradient (frozen norms, LoRA): no pass over the rows for them.
    const bool parameters = ctx->needs_input_grad(2) || ctx->needs_input_grad(3);
    at::Tensor ds = at::empty_like(in.s), partial = at::zeros({parameters ? tasks : 0, 2, d}, in.s.options());
    const float *pdy = in.dy.data_ptr<float>(), *pin = in.ds_in.defined() ? in.ds_in.data_ptr<float>() : nullptr;
    const float *ps = in.s.data_ptr<float>(), *pw = in.w.data_ptr<float>();
    const float *pm = in.mean.data_ptr<float>(), *pr = in.rstd.data_ptr<float>();
    float *pds = ds.data_ptr<float>(), *pp = partial.data_ptr<float>();
    at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t)
        cpu::add_layer_norm_backward(pdy, pin, ps, pw, pm, pr, pds, parameters ? pp + 2 * t * d : nullptr,
                                     parameters ? pp + (2 * t + 1) * d : nullptr, rows * t / tasks,
                                     rows * (t + 1) / tasks, d);
    });
    if (!parameters) return {ds, ds, at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor sums = partial.sum(0);  // (2, d): dw, db
    return {ds, ds, sums[0], in.b.numel() ? sums[1] : at::Tensor(), at::Tensor()};
  }
};

bool fused_here(const at::Tensor& t) {
  return !t.defined() ||
         (t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.layout() == at::kStrided);
}

}  // namespace

std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps) {
  if (x.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed()) {
      detail::check_shapes(x, delta, w, b, "add_layer_norm");
      if (auto out = kernels->add_layer_norm(x, delta, w, b, eps)) return *std::move(out);
    }
  return reference::add_layer_norm(x, delta, w, b, eps);  // see the header: the loops are slower here
}

namespace fused_cpu {
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps) {
  detail::check_shapes(x, delta, w, b, "fused_cpu::add_layer_norm");
  check_arg(fused_here(x) && fused_here(delta) && fused_here(w) && fused_here(b), "fused_cpu::add_layer_norm",
            "x, delta, w and b must be contiguous float32 CPU tensors");
  const torch::autograd::variable_list out =
      AddLayerNormCpu::apply(x, delta, w, b.defined() ? b : at::empty({0}, x.options()), eps);
  return {out[0], out[1]};
}
}  // namespace fused_cpu

namespace reference {
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps) {
  detail::check_shapes(x, delta, w, b, "reference::add_layer_norm");
  const at::Tensor s = x + delta;
  return {s, at::layer_norm(s, {s.size(-1)}, w, b, eps)};
}
}  // namespace reference

}  // namespace loom_ops
