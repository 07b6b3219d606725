#include <loom_ops/swiglu.hpp>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "../cuda_dispatch/kernel_table.hpp"
#include "swiglu_cpu.hpp"
#include "swiglu_shapes.hpp"

namespace loom_ops {
namespace {

// 32K elements per task, LibTorch's own elementwise grain: below that a thread costs more than it saves.
constexpr int64_t kGrain = 32768;

struct SwigluCpu : torch::autograd::Function<SwigluCpu> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    ctx->save_for_backward({gate, up});
    at::Tensor y = at::empty_like(gate);
    const float *g = gate.data_ptr<float>(), *u = up.data_ptr<float>();
    float* out = y.data_ptr<float>();
    at::parallel_for(0, gate.numel(), kGrain, [&](int64_t begin, int64_t end) {
      cpu::swiglu_forward(g + begin, u + begin, out + begin, end - begin);
    });
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &gate = saved[0], &up = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dgate = at::empty_like(gate), dup = at::empty_like(up);
    const float *pdy = dy.data_ptr<float>(), *g = gate.data_ptr<float>(), *u = up.data_ptr<float>();
    float *pdg = dgate.data_ptr<float>(), *pdu = dup.data_ptr<float>();
    at::parallel_for(0, gate.numel(), kGrain, [&](int64_t begin, int64_t end) {
      cpu::swiglu_backward(pdy + begin, g + begin, u + begin, pdg + begin, pdu + begin, end - begin);
    });
    return {dgate, dup};
  }
};

bool fused_here(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.layout() == at::kStrided;
}

}  // namespace

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  swiglu_detail::check_pair(gate, up, "swiglu");
  if (gate.is_cuda())
    if (const auto* kernels = cuda_dispatch::installed())
      if (auto y = kernels->swiglu(gate, up)) return *std::move(y);
  if (!fused_here(gate) || !fused_here(up)) return reference::swiglu(gate, up);
  return SwigluCpu::apply(gate, up);
}

namespace reference {
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  swiglu_detail::check_pair(gate, up, "reference::swiglu");
  return at::silu(gate) * up;
}
}  // namespace reference

}  // namespace loom_ops
