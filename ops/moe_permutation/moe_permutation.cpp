#include <loom_ops/moe_permutation.hpp>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

#include "../cuda_dispatch/kernel_table.hpp"
#include "moe_permutation_args.hpp"
#include "moe_permutation_cpu.hpp"
#include "moe_permutation_math.hpp"

namespace loom_ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// About 32K floats per task, LibTorch's elementwise grain, in whole rows.
int64_t row_grain(int64_t C) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(C, 1)); }

// inverse[order[i]] = i. The loops index with both, so an order that is not a permutation of
// 0 .. n - 1 is refused here, before any of them runs.
at::Tensor inverse_of(const at::Tensor& order, const char* op) {
  const int64_t n = order.size(0);
  at::Tensor inverse = at::full({n}, -1, order.options());
  const int64_t* o = order.data_ptr<int64_t>();
  int64_t* inv = inverse.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = o[i];
    check_arg(p >= 0 && p < n && inv[p] < 0, op, [&] {
      return "order must be a permutation of 0 .. " + std::to_string(n - 1) + "; position " + std::to_string(i) +
             " holds " + std::to_string(p) + (p >= 0 && p < n ? ", which an earlier position holds too" : "");
    });
    inv[p] = i;
  }
  return inverse;
}

struct PermuteCpu : torch::autograd::Function<PermuteCpu> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& order, int64_t k) {
    const int64_t N = x.size(0), C = x.size(1);
    ctx->save_for_backward({inverse_of(order, "moe_permute")});
    ctx->saved_data["k"] = k;
    at::Tensor rows = at::empty({N * k, C}, x.options());
    const float* px = x.data_ptr<float>();
    const int64_t* po = order.data_ptr<int64_t>();
    float* pr = rows.data_ptr<float>();
    at::parallel_for(0, N * k, row_grain(C), [&](int64_t begin, int64_t end) {
      cpu::moe_gather_rows(px, po, k, C, pr, begin, end);
    });
    return rows;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor inverse = ctx->get_saved_variables()[0];
    const int64_t k = ctx->saved_data["k"].toInt();
    const at::Tensor drows = grads[0].contiguous();
    const int64_t C = drows.size(1), N = drows.size(0) / k;
    at::Tensor dx = at::empty({N, C}, drows.options());
    const float* pg = drows.data_ptr<float>();
    const int64_t* inv = inverse.data_ptr<int64_t>();
    float* pdx = dx.data_ptr<float>();
    at::parallel_for(0, N, row_grain(C * k), [&](int64_t begin, int64_t end) {
      cpu::moe_sum_rows(pg, inv, nullptr, k, C, pdx, begin, end);
    });
    return {dx, at::Tensor(), at::Tensor()};
  }
};

struct CombineCpu : torch::autograd::Function<CombineCpu> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top) {
    const int64_t N = top.size(0), k = top.size(1), C = rows.size(1);
    const at::Tensor inverse = inverse_of(order, "moe_combine");
    ctx->save_for_backward({rows, order, top});
    at::Tensor out = at::empty({N, C}, rows.options());
    const float *pr = rows.data_ptr<float>(), *pt = top.data_ptr<float>();
    const int64_t* inv = inverse.data_ptr<int64_t>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, N, row_grain(C * k), [&](int64_t begin, int64_t end) {
      cpu::moe_sum_rows(pr, inv, pt, k, C, po, begin, end);
    });
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &rows = saved[0], &order = saved[1], &top = saved[2];
    const at::Tensor dout = grads[0].contiguous();
    const int64_t k = top.size(1), C = rows.size(1);
    at::Tensor drows = at::empty_like(rows), dtop = at::empty_like(top);
    const float *pg = dout.data_ptr<float>(), *pr = rows.data_ptr<float>(), *pt = top.data_ptr<float>();
    const int64_t* po = order.data_ptr<int64_t>();
    float *pdr = drows.data_ptr<float>(), *pdt = dtop.data_ptr<float>();
    at::parallel_for(0, rows.size(0), row_grain(C), [&](int64_t begin, int64_t end) {
      cpu::moe_combine_backward(pg, pr, po, pt, k, C, pdr, pdt, begin, end);
    });
    return {drows, at::Tensor(), dtop};
  }
};

bool fused_here(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.layout() == at::kStrided;
}

bool choices_fit(int64_t k) { return k <= moe_permutation_math::kMaxChoices; }

}  // namespace

at::Tensor moe_permute(const at::Tensor& x, const at::Tensor& order, int64_t k) {
  moe_permutation_detail::check_permute(x, order, k, "moe_permute");
  if (x.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto rows = kernels->moe_permute(x, order, k)) return *std::move(rows);
  if (!fused_here(x) || !choices_fit(k)) return reference::moe_permute(x, order, k);
  return PermuteCpu::apply(x, order.contiguous(), k);
}

at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top) {
  moe_permutation_detail::check_combine(rows, order, top, "moe_combine");
  if (rows.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto sums = kernels->moe_combine(rows, order, top)) return *std::move(sums);
  if (!fused_here(rows) || !fused_here(top) || !choices_fit(top.size(1))) return reference::moe_combine(rows, order, top);
  return CombineCpu::apply(rows, order.contiguous(), top);
}

}  // namespace loom_ops
