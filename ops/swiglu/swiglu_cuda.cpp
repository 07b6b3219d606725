// The ATen side of the CUDA SwiGLU: checks, the outputs, the stream, autograd. The arithmetic is
// swiglu.cu's.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <loom_ops/check_args.hpp>
#include <loom_ops/swiglu.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "../cuda_common/element_type_of.hpp"
#include "swiglu_kernel.hpp"
#include "swiglu_shapes.hpp"

namespace loom_ops::cuda {
namespace {

void check_launch(cudaError_t status) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("loom_ops::cuda::swiglu: launch failed: ") + cudaGetErrorString(status));
}

cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

SwigluParams params_of(const at::Tensor& gate, const at::Tensor& up) {
  SwigluParams p;
  p.type = element_type_of(gate, "cuda::swiglu");
  p.count = gate.numel();
  p.gate = gate.const_data_ptr();
  p.up = up.const_data_ptr();
  return p;
}

struct SwigluCuda : torch::autograd::Function<SwigluCuda> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    const c10::cuda::CUDAGuard on_device(gate.device());
    ctx->save_for_backward({gate, up});
    at::Tensor y = at::empty_like(gate, at::MemoryFormat::Contiguous);
    SwigluParams p = params_of(gate, up);
    p.y = y.mutable_data_ptr();
    check_launch(launch_swiglu_forward(p, stream_of(gate)));
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &gate = saved[0], &up = saved[1];
    const c10::cuda::CUDAGuard on_device(gate.device());
    const at::Tensor dy = grads[0].to(gate.scalar_type()).contiguous();
    at::Tensor dgate = at::empty_like(gate, at::MemoryFormat::Contiguous);
    at::Tensor dup = at::empty_like(up, at::MemoryFormat::Contiguous);
    SwigluParams p = params_of(gate, up);
    p.dy = dy.const_data_ptr();
    p.dgate = dgate.mutable_data_ptr();
    p.dup = dup.mutable_data_ptr();
    check_launch(launch_swiglu_backward(p, stream_of(gate)));
    return {dgate, dup};
  }
};

}  // namespace

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  swiglu_detail::check_pair(gate, up, "cuda::swiglu");
  check_arg(gate.is_cuda(), "cuda::swiglu", [&] { return "gate must be a CUDA tensor, got one on " + gate.device().str(); });
  element_type_of(gate, "cuda::swiglu");
  return SwigluCuda::apply(gate.contiguous(), up.contiguous());
}

}  // namespace loom_ops::cuda
