#include "layers/cuda_kernels.hpp"

#include <loom_ops/cuda_kernels.hpp>

#include "layers/model_common.hpp"

namespace loom_gpt {

void use_cuda_kernels_from(const loom::Config& c, const loom::Context& ctx, const std::string& component) {
  const std::string value = c.str("cuda_kernels");
  require(value == "aten" || value == "loom", component + ": cuda_kernels must be \"aten\" or \"loom\", got \"" +
                                                  value + "\"");
  const bool on = value == "loom";
#if LOOM_GPT_CUDA_KERNELS
  loom_ops::cuda::use_kernels(on);
#else
  require(!on, component + ": cuda_kernels = \"loom\", but this build of the plugin has no CUDA kernels (CMake found "
                           "no nvcc, or it is a sanitizer or fuzzing build); use \"aten\"");
#endif
  if (!on) return;
  if (ctx.device.rfind("cuda", 0) != 0)
    loom::log(LOOM_LOG_LEVEL_INFO, component,
              "cuda_kernels = \"loom\" applies to CUDA tensors only; this run is on " + ctx.device);
  else
    loom::log(LOOM_LOG_LEVEL_WARN, component,
              "cuda_kernels = \"loom\": Loom's CUDA kernels run in place of LibTorch's; they have not been checked "
              "on a GPU yet (ops/README.md), so compare the losses with cuda_kernels = \"aten\"");
}

}  // namespace loom_gpt
