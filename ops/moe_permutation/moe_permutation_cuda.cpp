// The ATen side of the CUDA MoE permutation: checks, the inverse permutation, the outputs, the
// stream, autograd. The arithmetic is moe_permutation.cu's.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <loom_ops/check_args.hpp>
#include <loom_ops/moe_permutation.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "../cuda_common/element_type_of.hpp"
#include "moe_permutation_args.hpp"
#include "moe_permutation_kernel.hpp"
#include "moe_permutation_math.hpp"

namespace loom_ops::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check_launch(cudaError_t status, const char* op) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("loom_ops::") + op + ": launch failed: " + cudaGetErrorString(status));
}

cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

// inverse[order[i]] = i, -1 where order names no position (it then repeats another pair, and
// the kernels trap): checked on the device, no host sync.
at::Tensor inverse_of(const at::Tensor& order) {
  return at::full_like(order, -1).scatter_(0, order, at::arange(order.size(0), order.options()));
}

MoePermutationParams params_of(const at::Tensor& x, const at::Tensor& order, int64_t tokens, int64_t k, const char* op) {
  MoePermutationParams p;
  p.type = element_type_of(x, op);
  p.tokens = tokens;
  p.choices = k;
  p.width = x.size(1);
  p.order = order.const_data_ptr<int64_t>();
  p.x = x.const_data_ptr();
  return p;
}

struct PermuteCuda : torch::autograd::Function<PermuteCuda> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& order, int64_t k) {
    const c10::cuda::CUDAGuard on_device(x.device());
    const int64_t N = x.size(0);
    ctx->save_for_backward({order});
    ctx->saved_data["k"] = k;
    at::Tensor rows = at::empty({N * k, x.size(1)}, x.options());
    MoePermutationParams p = params_of(x, order, N, k, "cuda::moe_permute");
    p.out = rows.mutable_data_ptr();
    check_launch(launch_moe_gather(p, stream_of(x)), "cuda::moe_permute");
    return rows;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor order = ctx->get_saved_variables()[0];
    const int64_t k = ctx->saved_data["k"].toInt();
    const at::Tensor drows = grads[0].contiguous();
    const c10::cuda::CUDAGuard on_device(drows.device());
    const int64_t N = drows.size(0) / k;
    const at::Tensor inverse = inverse_of(order);
    at::Tensor dx = at::empty({N, drows.size(1)}, drows.options());
    MoePermutationParams p = params_of(drows, order, N, k, "cuda::moe_permute");
    p.inverse = inverse.const_data_ptr<int64_t>();
    p.out = dx.mutable_data_ptr();
    check_launch(launch_moe_sum(p, stream_of(drows)), "cuda::moe_permute");
    return {dx, at::Tensor(), at::Tensor()};
  }
};

struct CombineCuda : torch::autograd::Function<CombineCuda> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top) {
    const c10::cuda::CUDAGuard on_device(rows.device());
    const int64_t N = top.size(0), k = top.size(1);
    ctx->save_for_backward({rows, order, top});
    const at::Tensor inverse = inverse_of(order);
    at::Tensor out = at::empty({N, rows.size(1)}, rows.options());
    MoePermutationParams p = params_of(rows, order, N, k, "cuda::moe_combine");
    p.inverse = inverse.const_data_ptr<int64_t>();
    p.weight = top.const_data_ptr();
    p.out = out.mutable_data_ptr();
    check_launch(launch_moe_sum(p, stream_of(rows)), "cuda::moe_combine");
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &rows = saved[0], &order = saved[1], &top = saved[2];
    const c10::cuda::CUDAGuard on_device(rows.device());
    const at::Tensor dout = grads[0].to(rows.scalar_type()).contiguous();
    at::Tensor drows = at::empty_like(rows), dtop = at::empty_like(top);
    MoePermutationParams p = params_of(rows, order, top.size(0), top.size(1), "cuda::moe_combine");
    p.weight = top.const_data_ptr();
    p.dout = dout.const_data_ptr();
    p.out = drows.mutable_data_ptr();
    p.dweight = dtop.mutable_data_ptr();
    check_launch(launch_moe_combine_backward(p, stream_of(rows)), "cuda::moe_combine");
    return {drows, at::Tensor(), dtop};
  }
};

void check_cuda(const at::Tensor& t, int64_t k, const char* op) {
  check_arg(t.is_cuda(), op, [&] { return "x must be a CUDA tensor, got one on " + t.device().str(); });
  check_arg(k <= moe_permutation_math::kMaxChoices, op, [&] {
    return "k must be at most " + std::to_string(moe_permutation_math::kMaxChoices) + ", got " + std::to_string(k);
  });
  element_type_of(t, op);
}

}  // namespace

at::Tensor moe_permute(const at::Tensor& x, const at::Tensor& order, int64_t k) {
  moe_permutation_detail::check_permute(x, order, k, "cuda::moe_permute");
  check_cuda(x, k, "cuda::moe_permute");
  return PermuteCuda::apply(x.contiguous(), order.contiguous(), k);
}

at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top) {
  moe_permutation_detail::check_combine(rows, order, top, "cuda::moe_combine");
  check_cuda(rows, top.size(1), "cuda::moe_combine");
  return CombineCuda::apply(rows.contiguous(), order.contiguous(), top.contiguous());
}

}  // namespace loom_ops::cuda
