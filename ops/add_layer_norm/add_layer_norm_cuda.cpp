// The ATen side of the CUDA residual add + LayerNorm: checks, outputs, the stream, autograd. The
// arithmetic is add_layer_norm.cu's.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <loom_ops/add_layer_norm.hpp>
#include <loom_ops/check_args.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "../cuda_common/element_type_of.hpp"
#include "../cuda_common/row_blocks.hpp"
#include "add_layer_norm_args.hpp"
#include "add_layer_norm_kernel.hpp"

namespace loom_ops::cuda {
namespace {

namespace detail = add_layer_norm_detail;
constexpr const char* kOp = "cuda::add_layer_norm";

void check_launch(cudaError_t status) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("loom_ops::cuda::add_layer_norm: launch failed: ") +
                             cudaGetErrorString(status));
}

AddLayerNormParams params_for(const at::Tensor& s, const at::Tensor& w, const at::Tensor& mean, const at::Tensor& rstd) {
  AddLayerNormParams p;
  p.type = element_type_of(s, kOp);
  p.columns = s.size(-1);
  p.rows = s.numel() / p.columns;
  p.w = w.const_data_ptr();
  p.mean = const_cast<float*>(mean.const_data_ptr<float>());  // written forward, read backward
  p.rstd = const_cast<float*>(rstd.const_data_ptr<float>());
  return p;
}

cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

struct AddLayerNormCuda : torch::autograd::Function<AddLayerNormCuda> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& delta, const at::Tensor& w, const at::Tensor& b,
                                                double eps) {
    const c10::cuda::CUDAGuard on_device(x.device());
    at::Tensor s = at::empty_like(x), y = at::empty_like(x);
    const auto stats = x.options().dtype(at::kFloat);
    at::Tensor mean = at::empty({x.numel() / x.size(-1)}, stats), rstd = at::empty({x.numel() / x.size(-1)}, stats);
    AddLayerNormParams p = params_for(s, w, mean, rstd);
    p.eps = static_cast<float>(eps);
    p.x = x.const_data_ptr();
    p.delta_type = element_type_of(delta, kOp);
    p.delta = delta.const_data_ptr();
    p.b = b.numel() ? b.const_data_ptr() : nullptr;
    p.s = s.mutable_data_ptr();
    p.y = y.mutable_data_ptr();
    check_launch(launch_add_layer_norm_forward(p, stream_of(x)));
    detail::save(ctx, s, w, b, mean, rstd);
    return {s, y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const detail::Incoming in = detail::incoming(ctx, grads);
    if (!in.dy.defined()) return detail::only_through_s(in);
    const c10::cuda::CUDAGuard on_device(in.s.device());
    at::Tensor ds = at::empty_like(in.s);
    AddLayerNormParams p = params_for(in.s, in.w, in.mean, in.rstd);
    // Every block writes its rows of partial; with no rows no block runs, and dw and db are zeros.
    at::Tensor partial = at::zeros({row_partial_blocks(p.rows), 2, p.columns}, in.s.options().dtype(at::kFloat));
    p.s = const_cast<void*>(in.s.const_data_ptr());  // read only backward
    p.dy = in.dy.const_data_ptr();
    p.ds_in = in.ds_in.defined() ? in.ds_in.const_data_ptr() : nullptr;
    p.ds = ds.mutable_data_ptr();
    p.partial = partial.mutable_data_ptr<float>();
    check_launch(launch_add_layer_norm_backward(p, stream_of(in.s)));
    const at::Tensor sums = partial.sum(0).to(in.w.scalar_type());  // (2, D): dw, db
    return {ds, ds, sums[0], in.b.numel() ? sums[1] : at::Tensor(), at::Tensor()};  // autograd casts delta's to its dtype
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                 const at::Tensor& b, double eps) {
  detail::check_shapes(x, delta, w, b, kOp);
  for (const at::Tensor* t : {&x, &delta, &w, &b}) {
    if (!t->defined()) continue;
    check_residual_operand(x, delta, *t, kOp, "x, delta, w and b");
  }
  check_arg(x.size(-1) <= kAddLayerNormMostColumns, kOp, [&] {
    return "rows of " + std::to_string(x.size(-1)) + " elements; the kernel takes " +
           std::to_string(kAddLayerNormMostColumns) + " at most";
  });
  element_type_of(x, kOp);
  const at::Tensor bias = b.defined() ? b.contiguous() : at::empty({0}, x.options());
  const torch::autograd::variable_list out =
      AddLayerNormCuda::apply(x.contiguous(), delta.contiguous(), w.contiguous(), bias, eps);
  return {out[0], out[1]};
}

}  // namespace loom_ops::cuda
