// gelu_tanh.hpp: GELU with the tanh approximation (GPT-2's gelu_new), as at::gelu(x, "tanh")
// computes it, but several times faster on CPU. The same function written as
//   0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// needs one exponential, which vectorizes (glibc's libmvec), where LibTorch 1.13 evaluates a
// tanh: 10.6 against 1.7 ms forward, 9.7 against 2.7 ms backward, for 3.1 M floats on one core of the development VM
// (tools/bench/README.md, "Threads"). Contiguous fp32 CPU tensors take this path, with a
// backward of its own; anything else (CUDA, bf16) goes to at::gelu. Differentiable once.
// The CUDA kernel (cuda::gelu_tanh, in loom_ops_cuda) is called by name only: no model uses it
// until tools/device-check has held it to the reference on a GPU and measured it.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops {

at::Tensor gelu_tanh(const at::Tensor& x);

namespace reference {
// at::gelu(x, "tanh"): what every path of the op must match, values and gradients.
at::Tensor gelu_tanh(const at::Tensor& x);
}  // namespace reference

namespace cuda {
// x: a CUDA tensor of float32, bfloat16 or float16 -> the same function in the same dtype,
// computed in fp32 by ops/gelu_tanh/gelu_tanh.cu (one read, one write), with a backward kernel
// of its own. Defined in loom_ops_cuda: link it to call this.
at::Tensor gelu_tanh(const at::Tensor& x);
}  // namespace cuda

}  // namespace loom_ops
