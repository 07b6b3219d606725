// swiglu.hpp: SwiGLU's product, silu(gate) * up (Shazeer, arXiv:2002.05202), the middle of every
// Llama-family MLP and of each expert. Fused, it reads gate and up once and writes y once
// (the composition writes silu(gate) first and reads it back), and keeps only gate and up for
// backward (the composition also keeps silu(gate): one (tokens x F) tensor a layer less).
// On the CPU, contiguous fp32 tensors of one shape take a fused path (one exp per element,
// glibc's vector exp); anything else the reference's composition. The CUDA kernels
// (cuda::swiglu, in loom_ops_cuda) are called by name only: the entry point does not take them
// on CUDA until tools/device-check has held them to the reference on a GPU and measured them.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops {

// gate, up: one shape and dtype -> silu(gate) * up, differentiable in both.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);

namespace reference {
// at::silu(gate) * up: what every path must match, values and gradients.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);
}  // namespace reference

namespace cuda {
// The same on CUDA tensors of float32, bfloat16 or float16, computed in fp32 by
// ops/swiglu/swiglu.cu with the reference's roundings (silu(gate) rounded to the dtype before it
// meets up, dy up before it meets silu's slope), with a backward kernel of its own. Defined in
// loom_ops_cuda: link it to call this.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);
}  // namespace cuda

}  // namespace loom_ops
