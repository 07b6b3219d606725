// The ATen side of the CUDA GELU: checks, the output, the stream, autograd. The arithmetic is
// gelu_tanh.cu's.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <loom_ops/check_args.hpp>
#include <loom_ops/gelu_tanh.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "../cuda_common/element_type_of.hpp"
#include "gelu_tanh_kernel.hpp"

namespace loom_ops::cuda {
namespace {

void run(bool backward, const at::Tensor& x, const at::Tensor& dy, at::Tensor& out) {
  const c10::cuda::CUDAGuard on_device(x.device());
  GeluTanhParams p;
  p.type = element_type_of(x, "cuda::gelu_tanh");
  p.count = x.numel();
  p.x = x.const_data_ptr();
  p.dy = dy.defined() ? dy.const_data_ptr() : nullptr;
  p.out = out.mutable_data_ptr();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  const cudaError_t status = backward ? launch_gelu_tanh_backward(p, stream) : launch_gelu_tanh_forward(p, stream);
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("loom_ops::cuda::gelu_tanh: launch failed: ") + cudaGetErrorString(status));
}

struct GeluTanhCuda : torch::autograd::Function<GeluTanhCuda> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
    run(false, x, at::Tensor(), y);
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].to(x.scalar_type()).contiguous();
    at::Tensor dx = at::empty_like(x, at::MemoryFormat::Contiguous);
    run(true, x, dy, dx);
    return {dx};
  }
};

}  // namespace

at::Tensor gelu_tanh(const at::Tensor& x) {
  check_arg(x.is_cuda(), "cuda::gelu_tanh", [&] { return "x must be a CUDA tensor, got one on " + x.device().str(); });
  element_type_of(x, "cuda::gelu_tanh");
  return GeluTanhCuda::apply(x.contiguous());
}

}  // namespace loom_ops::cuda
