#include <loom_ops/gelu_tanh.hpp>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "../cuda_dispatch/kernel_table.hpp"
#include "gelu_tanh_cpu.hpp"

namespace loom_ops {
namespace {

// 32K elements per task, LibTorch's own elementwise grain: below that a thread costs more than it saves.
constexpr int64_t kGrain = 32768;

struct GeluTanh : torch::autograd::Function<GeluTanh> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    at::Tensor y = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain,
                     [&](int64_t begin, int64_t end) { cpu::gelu_tanh_forward(in + begin, out + begin, end - begin); });
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    const float* g = dy.data_ptr<float>();
    const float* in = x.data_ptr<float>();
    float* out = dx.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      cpu::gelu_tanh_backward(g + begin, in + begin, out + begin, end - begin);
    });
    return {dx};
  }
};

}  // namespace

at::Tensor gelu_tanh(const at::Tensor& x) {
  if (x.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto y = kernels->gelu_tanh(x)) return *std::move(y);
  if (x.device().is_cpu() && x.scalar_type() == at::kFloat && x.is_contiguous() && x.layout() == at::kStrided)
    return GeluTanh::apply(x);
  return at::gelu(x, "tanh");
}

}  // namespace loom_ops
