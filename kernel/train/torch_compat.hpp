// torch_compat.hpp: the few LibTorch calls that changed within the 2.x line Loom builds against
// (2.4 and later; tools/python-requirements.txt pins the one every machine uses). Code elsewhere
// calls these functions and never tests TORCH_VERSION itself.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>

namespace loom::compat {

// Autocast for one device type (the per-device-type functions of LibTorch 2.4 and later).
inline bool autocast_enabled(at::DeviceType type) { return at::autocast::is_autocast_enabled(type); }

inline at::ScalarType autocast_dtype(at::DeviceType type) { return at::autocast::get_autocast_dtype(type); }

inline void set_autocast(at::DeviceType type, bool enabled, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
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
