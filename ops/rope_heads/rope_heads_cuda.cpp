// The ATen side of the CUDA rope_heads: checks, outputs, the stream, autograd. The arithmetic is
// rope_heads.cu's.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <loom_ops/check_args.hpp>
#include <loom_ops/rope_heads.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "../cuda_common/element_type_of.hpp"
#include "rope_heads_args.hpp"
#include "rope_heads_kernel.hpp"

namespace loom_ops::cuda {
namespace {

constexpr const char* kOp = "cuda::rope_heads";

void check_launch(cudaError_t status) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("loom_ops::cuda::rope_heads: launch failed: ") + cudaGetErrorString(status));
}

// What forward and backward share. Empty w: no norm; empty positions: 0..T-1 (rope_heads_args.hpp).
RopeHeadsParams params_of(const at::Tensor& x, const at::Tensor& w, const at::Tensor& cos, const at::Tensor& sin,
                          const at::Tensor& positions, double eps) {
  RopeHeadsParams p;
  p.x_type = element_type_of(x, kOp);
  p.out_type = w.numel() ? element_type_of(w, kOp) : p.x_type;
  p.B = x.size(0), p.T = x.size(1), p.H = x.size(2), p.D = x.size(3);
  p.table_rows = cos.size(0);
  p.eps = static_cast<float>(eps);
  p.x = x.const_data_ptr();
  p.w = w.numel() ? w.const_data_ptr() : nullptr;
  p.cos = cos.const_data_ptr<float>();
  p.sin = sin.const_data_ptr<float>();
  p.positions = positions.numel() ? positions.const_data_ptr<int64_t>() : nullptr;
  return p;
}

cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

struct RopeHeadsCuda : torch::autograd::Function<RopeHeadsCuda> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& positions, double eps) {
    const c10::cuda::CUDAGuard on_device(x.device());
    RopeHeadsParams p = params_of(x, w, cos, sin, positions, eps);
    at::Tensor y = at::empty({p.B, p.H, p.T, p.D}, x.options().dtype(w.numel() ? w.scalar_type() : x.scalar_type()));
    at::Tensor inverse = at::empty({p.w ? p.B * p.T * p.H : 0}, x.options().dtype(at::kFloat));
    p.y = y.mutable_data_ptr();
    p.inverse_rms = inverse.mutable_data_ptr<float>();
    check_launch(launch_rope_heads_forward(p, stream_of(x)));
    rope_heads_detail::save(ctx, {x, w, inverse, cos, sin, positions, eps});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const rope_heads_detail::Saved saved = rope_heads_detail::restore(ctx);
    const at::Tensor &x = saved.x, &w = saved.w, &inverse = saved.inverse_rms;
    const c10::cuda::CUDAGuard on_device(x.device());
    RopeHeadsParams p = params_of(x, w, saved.cos, saved.sin, saved.positions, saved.eps);
    const at::Tensor dy = grads[0].to(w.numel() ? w.scalar_type() : x.scalar_type()).contiguous();
    at::Tensor dx = at::empty_like(x), dw = at::zeros({w.numel() ? p.D : 0}, x.options().dtype(at::kFloat));
    p.inverse_rms = const_cast<float*>(inverse.const_data_ptr<float>());  // read only backward
    p.dy = dy.const_data_ptr();
    p.dx = dx.mutable_data_ptr();
    p.dw = dw.mutable_data_ptr<float>();
    check_launch(launch_rope_heads_backward(p, stream_of(x)));
    return {dx, w.numel() ? dw.to(w.scalar_type()) : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor rope_heads(const Rope& rope, const at::Tensor& x, const at::Tensor& positions,
                      const at::Tensor& norm_weight, double eps) {
  rope_heads_detail::check(rope, x, positions, norm_weight, kOp);
  check_arg(x.is_cuda() && rope.cos.is_cuda() && rope.cos.device() == x.device(), kOp,
            [&] { return "x and the rotary table must be on one CUDA device, got " + x.device().str(); });
  check_arg(rope.cos.scalar_type() == at::kFloat && rope.sin.scalar_type() == at::kFloat, kOp,
            "the rotary table must be float32 (as Rope builds it)");
  check_arg(x.size(3) <= kRopeHeadsMostChannels, kOp,
            [&] { return "D must be at most " + std::to_string(kRopeHeadsMostChannels) + ", got " + std::to_string(x.size(3)); });
  element_type_of(x, kOp);
  if (norm_weight.defined())
    check_arg(norm_weight.device() == x.device() &&
                  (norm_weight.scalar_type() == x.scalar_type() || norm_weight.scalar_type() == at::kFloat),
              kOp, "norm_weight must be on x's device, of x's dtype or float32");
  if (positions.defined()) check_arg(positions.device() == x.device(), kOp, "positions must be on x's device");
  const at::Tensor no_norm = at::empty({0}, x.options()), rows_in_order = at::empty({0}, x.options().dtype(at::kLong));
  return RopeHeadsCuda::apply(x.contiguous(), norm_weight.defined() ? norm_weight.contiguous() : no_norm,
                              rope.cos.contiguous(), rope.sin.contiguous(),
                              positions.defined() ? positions.contiguous() : rows_in_order, eps);
}

}  // namespace loom_ops::cuda
