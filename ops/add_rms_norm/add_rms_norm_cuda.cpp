// The ATen side of the CUDA residual add + RMSNorm: checks, outputs, the stream, autograd. The
// arithmetic is add_rms_norm.cu's.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <loom_ops/add_rms_norm.hpp>
#include <loom_ops/check_args.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "../cuda_common/element_type_of.hpp"
#include "../cuda_common/row_blocks.hpp"
#include "add_rms_norm_grads.hpp"
#include "add_rms_norm_kernel.hpp"
#include "add_rms_norm_launches.hpp"

namespace loom_ops::cuda {
namespace {

constexpr const char* kOp = "cuda::add_rms_norm";

void check_launch(cudaError_t status, const char* op) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("loom_ops::") + op + ": launch failed: " + cudaGetErrorString(status));
}

AddRmsNormParams params_for(const at::Tensor& s, const at::Tensor& w, const at::Tensor& inverse, const char* op) {
  AddRmsNormParams p;
  p.type = element_type_of(s, op);
  p.delta_type = p.type;
  p.columns = s.size(-1);
  p.rows = s.numel() / p.columns;
  p.w = w.const_data_ptr();
  p.inverse_rms = inverse.mutable_data_ptr<float>();
  return p;
}

cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

struct AddRmsNormCuda : torch::autograd::Function<AddRmsNormCuda> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& delta, const at::Tensor& w, double eps) {
    add_rms_norm_launch::Forward out = add_rms_norm_launch::forward(x, delta, w, eps, kOp);
    ctx->save_for_backward({out.s, w, out.inverse_rms});
    return {out.s, out.y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const add_rms_norm_detail::Incoming in = add_rms_norm_detail::incoming(ctx, grads);
    if (!in.dy.defined()) return {in.ds_in, in.ds_in, at::Tensor(), at::Tensor()};
    const add_rms_norm_launch::Backward g = add_rms_norm_launch::backward(in.s, in.w, in.inverse_rms, in.dy, in.ds_in, kOp);
    return {g.ds, g.ds, g.dw, at::Tensor()};  // autograd casts delta's to its dtype
  }
};

}  // namespace

namespace add_rms_norm_launch {

void check_columns(const at::Tensor& x, const char* op) {
  check_arg(x.size(-1) <= kAddRmsNormMostColumns, op, [&] {
    return "rows of " + std::to_string(x.size(-1)) + " elements; the kernel takes " +
           std::to_string(kAddRmsNormMostColumns) + " at most";
  });
}

Forward forward(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w, double eps, const char* op) {
  const c10::cuda::CUDAGuard on_device(x.device());
  Forward out;
  out.s = delta.defined() ? at::empty_like(x) : at::Tensor();
  out.y = at::empty_like(x);
  out.inverse_rms = at::empty({x.numel() / x.size(-1)}, x.options().dtype(at::kFloat));
  AddRmsNormParams p = params_for(x, w, out.inverse_rms, op);
  p.eps = static_cast<float>(eps);
  p.x = x.const_data_ptr();
  if (delta.defined()) {
    p.delta_type = element_type_of(delta, op);
    p.delta = delta.const_data_ptr();
    p.s = out.s.mutable_data_ptr();
  }
  p.y = out.y.mutable_data_ptr();
  check_launch(launch_add_rms_norm_forward(p, stream_of(x)), op);
  return out;
}

Backward backward(const at::Tensor& s, const at::Tensor& w, const at::Tensor& inverse_rms, const at::Tensor& dy,
                  const at::Tensor& ds_in, const char* op) {
  const c10::cuda::CUDAGuard on_device(s.device());
  at::Tensor ds = at::empty_like(s);
  AddRmsNormParams p = params_for(s, w, inverse_rms, op);
  // Every block writes its row of partial; with no rows no block runs, and dw is zeros.
  const auto partial_options = s.options().dtype(at::kFloat);
  const std::vector<int64_t> partial_shape{row_partial_blocks(p.rows), p.columns};
  at::Tensor partial = p.rows == 0 ? at::zeros(partial_shape, partial_options) : at::empty(partial_shape, partial_options);
  p.s = const_cast<void*>(s.const_data_ptr());  // read only backward
  p.dy = dy.const_data_ptr();
  p.ds_in = ds_in.defined() ? ds_in.const_data_ptr() : nullptr;
  p.ds = ds.mutable_data_ptr();
  p.dw_partial = partial.mutable_data_ptr<float>();
  check_launch(launch_add_rms_norm_backward(p, stream_of(s)), op);
  return {ds, partial.sum(0).to(w.scalar_type())};
}

}  // namespace add_rms_norm_launch

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                               double eps) {
  for (const at::Tensor* t : {&x, &delta, &w})
    check_residual_operand(x, delta, *t, kOp, "x, delta and w");
  check_arg(x.dim() >= 1 && x.sizes() == delta.sizes() && w.dim() == 1 && w.size(0) == x.size(-1) && x.size(-1) > 0,
            kOp, [] { return std::string("x and delta must be (..., D) of one shape, D at least 1, and w (D)"); });
  add_rms_norm_launch::check_columns(x, kOp);
  element_type_of(x, kOp);
  const torch::autograd::variable_list out = AddRmsNormCuda::apply(x.contiguous(), delta.contiguous(), w.contiguous(), eps);
  return {out[0], out[1]};
}

}  // namespace loom_ops::cuda
