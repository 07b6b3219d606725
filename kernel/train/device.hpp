// device.hpp: where a run computes (run.device) and in which precision (run.precision).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "train/precision.hpp"

namespace loom {

// "auto" is cuda:LOCAL_RANK when LibTorch sees a GPU, else cpu; "cuda" is cuda:LOCAL_RANK.
// Throws a usage Failure naming `where` (the manifest position) when the device is unknown
// or not present.
at::Device resolve_device(const std::string& name, int local_rank, const std::string& where);

// Process-wide switches a precision needs once, before the first step (TF32 on CUDA).
void apply_precision(Precision precision, const at::Device& device);

// run.deterministic: LibTorch's deterministic algorithms (an op without one fails with an
// error naming it) and the cuBLAS workspace setting they need on CUDA; call before any CUDA
// work. CPU runs are reproducible without it.
void apply_determinism(bool deterministic);

// Runs forward and loss in bf16 under autocast while it lives (Precision::bf16), with fp32
// master weights: parameters, gradients and optimizer state stay fp32. Backward runs after
// the scope ends, as autocast expects. Other precisions: does nothing. Not thread-safe to
// share: autocast state is per thread, so create it on the thread that runs the forward.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const at::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  at::DeviceType type_ = at::kCPU;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

}  // namespace loom
