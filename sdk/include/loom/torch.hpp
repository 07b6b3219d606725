// loom/torch.hpp: what torch-linked plugins (models, optimizers) share: the build fingerprint
// and casts between the ABI's opaque tensor handles and at::Tensor.
//
// A loom_torch_tensor* is an at::Tensor* underneath. That is only sound because the host
// refuses any plugin whose fingerprint differs from its own (docs/abi.md, rule 7).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard, which sdk/README.md tells optimizers to use
#include <torch/version.h>

#include <loom/abi.h>

#define LOOM_TORCH_STR2(x) #x
#define LOOM_TORCH_STR(x) LOOM_TORCH_STR2(x)

// The CUDA version LibTorch was built with; CMake (loom_add_plugin TORCH) defines it.
#ifndef LOOM_TORCH_CUDA
#define LOOM_TORCH_CUDA "none"
#endif

#define LOOM_TORCH_FINGERPRINT                                                    \
  "libtorch " TORCH_VERSION "; cxx11abi " LOOM_TORCH_STR(_GLIBCXX_USE_CXX11_ABI) \
  "; cuda " LOOM_TORCH_CUDA

#undef LOOM_PLUGIN_FINGERPRINT
#define LOOM_PLUGIN_FINGERPRINT LOOM_TORCH_FINGERPRINT

namespace loom {
inline at::Tensor& tensor(loom_torch_tensor* handle) { return *reinterpret_cast<at::Tensor*>(handle); }
inline const at::Tensor& tensor(const loom_torch_tensor* handle) {
  return *reinterpret_cast<const at::Tensor*>(handle);
}
inline loom_torch_tensor* handle(at::Tensor& t) { return reinterpret_cast<loom_torch_tensor*>(&t); }
inline const loom_torch_tensor* handle(const at::Tensor& t) {
  return reinterpret_cast<const loom_torch_tensor*>(&t);
}
}  // namespace loom
