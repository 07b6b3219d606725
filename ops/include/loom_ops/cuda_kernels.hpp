// cuda_kernels.hpp: the switch that puts loom_ops_cuda's kernels on the entry points' CUDA path.
// Off by default: a kernel enters a model's GPU path only once tools/device-check has held it to
// its reference on a GPU and measured it faster (ops/README.md); until then a run asks for them
// (the transformer models' option cuda_kernels = "loom") to measure and check them in place.
// On: each entry point given CUDA tensors the kernel takes (float32, bfloat16 or float16, one
// dtype, within its size limits) runs the kernel; anything else, and every CPU tensor, takes
// the path it takes when off. The ops switched: gelu_tanh, swiglu, rms_norm, add_rms_norm,
// add_layer_norm, rope_heads, moe_permute, moe_combine, cross_entropy_rows (so the chunked loss).
#pragma once

namespace loom_ops {

// Whether this binary's entry points take the kernels (each binary that links loom_ops
// statically, each plugin, has its own switch).
bool cuda_kernels_in_use();

namespace cuda {
// Turns the kernels on or off for this binary's entry points. Defined in loom_ops_cuda: a binary
// built without nvcc has no kernels to turn on, and says so by not linking it.
void use_kernels(bool on);
}  // namespace cuda

}  // namespace loom_ops
