// cuda_kernels.hpp: the option cuda_kernels every model of this plugin declares: whether, on
// CUDA, the ops its layers call (ops/: GELU, SwiGLU, the residual add with RMSNorm or LayerNorm,
// rotary with Qwen3's q/k norm, the experts' permutation, the loss's rows) run Loom's own
// kernels or LibTorch's. Off ("aten") until a GPU has checked the kernels (ops/README.md).
#pragma once

#include <loom/plugin.hpp>

#include <string>

namespace loom_gpt {

inline constexpr loom_option_spec kCudaKernelsOption =
    loom::option("cuda_kernels", LOOM_OPTION_TYPE_STRING, "aten",
                 "\"loom\": on CUDA, run Loom's fused kernels (ops/) for GELU, SwiGLU, the residual add with "
                 "RMSNorm or LayerNorm, rotary with q/k norm, the experts' permutation and the loss, wherever they "
                 "take the tensors (one dtype of float32, bfloat16 or float16), LibTorch's elsewhere; not yet "
                 "checked on a GPU, so not the default. \"aten\": LibTorch's kernels. No effect on the CPU.");

// Reads the option and sets this plugin's switch (<loom_ops/cuda_kernels.hpp>). Throws
// loom::Error naming component and option for a value it does not know, and for "loom" where
// the plugin was built without nvcc (it has no kernels to run).
void use_cuda_kernels_from(const loom::Config& c, const loom::Context& ctx, const std::string& component);

}  // namespace loom_gpt
