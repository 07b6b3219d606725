// torch_compat.hpp: the one place where the LibTorch versions Loom builds against differ:
// 1.13 (Debian's CPU build, CI) and 2.x (the PyTorch wheel on the GPU machine). Code elsewhere
// calls these functions and never tests TORCH_VERSION itself.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#define LOOM_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace loom::compat {

// Autocast for one device type. 2.4 replaced the per-device functions (set_enabled for CUDA,
// set_cpu_enabled, set_autocast_gpu_dtype, ...) with ones that take the device type, and
// deprecated the old ones.
inline bool autocast_enabled(at::DeviceType type) {
#if LOOM_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(type);
#else
  return type == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline at::ScalarType autocast_dtype(at::DeviceType type) {
#if LOOM_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(type);
#else
  return type == at::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast(at::DeviceType type, bool enabled, at::ScalarType dtype) {
#if LOOM_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == at::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

// CUDA devices this process sees; 0 for a CPU-only LibTorch (its CUDA hooks are stubs).
inline int cuda_device_count() { return at::hasCUDA() ? at::detail::getCUDAHooks().getNumGPUs() : 0; }

// TF32 tensor cores for fp32 matmuls and convolutions on CUDA (a no-op for CPU ops). The
// matmul-precision switch exists since 1.12 and is what torch.set_float32_matmul_precision sets.
inline void allow_tf32(bool allowed) {
  at::globalContext().setFloat32MatmulPrecision(allowed ? "high" : "highest");
  at::globalContext().setAllowTF32CuDNN(allowed);
}

}  // namespace loom::compat
