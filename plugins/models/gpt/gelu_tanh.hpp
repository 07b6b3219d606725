// gelu_tanh.hpp: GELU with the tanh approximation (GPT-2's gelu_new), as at::gelu(x, "tanh")
// computes it, but several times faster on CPU. The same function written as
//   0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// needs one exponential, which vectorizes (glibc's libmvec), where LibTorch 1.13 evaluates a
// tanh: 10.6 against 1.7 ms forward, 9.7 against 2.7 ms backward, for 3.1 M floats on one core of the development VM
// (tools/bench/README.md, "Threads"). Contiguous fp32 CPU tensors take this path, with a
// backward of its own; anything else (CUDA, bf16) goes to at::gelu. Differentiable once.
#pragma once

#include <ATen/ATen.h>

namespace loom_gpt {

at::Tensor gelu_tanh(const at::Tensor& x);

}  // namespace loom_gpt
