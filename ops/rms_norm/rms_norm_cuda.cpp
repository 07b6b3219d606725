// RMSNorm alone on CUDA: add_rms_norm.cu's kernels with no delta (one set of RMSNorm kernels,
// as on the CPU one set of loops), with the reference's order of casts.
#include <loom_ops/check_args.hpp>
#include <loom_ops/rms_norm.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "../add_rms_norm/add_rms_norm_launches.hpp"
#include "../cuda_common/element_type_of.hpp"
#include "rms_norm_args.hpp"

namespace loom_ops::cuda {
namespace {

constexpr const char* kOp = "cuda::rms_norm";

struct RmsNormCuda : torch::autograd::Function<RmsNormCuda> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, double eps) {
    add_rms_norm_launch::Forward out = add_rms_norm_launch::forward(x, at::Tensor(), w, eps, kOp);
    ctx->save_for_backward({x, w, out.inverse_rms});
    return out.y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &inverse = saved[2];
    const at::Tensor dy = grads[0].to(x.scalar_type()).contiguous();
    const add_rms_norm_launch::Backward g = add_rms_norm_launch::backward(x, w, inverse, dy, at::Tensor(), kOp);
    return {g.ds, g.dw, at::Tensor()};
  }
};

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  rms_norm_detail::check_shapes(x, w, kOp);
  check_arg(x.is_cuda() && w.device() == x.device() && w.scalar_type() == x.scalar_type(), kOp, [&] {
    return "x and w must be CUDA tensors of one dtype on one device, got " + x.device().str() + " " +
           c10::toString(x.scalar_type()) + " and " + w.device().str() + " " + c10::toString(w.scalar_type());
  });
  add_rms_norm_launch::check_columns(x, kOp);
  element_type_of(x, kOp);
  return RmsNormCuda::apply(x.contiguous(), w.contiguous(), eps);
}

}  // namespace loom_ops::cuda
