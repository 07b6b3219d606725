#include "train/device.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "base/failure.hpp"
#include "train/torch_compat.hpp"

namespace loom {

at::Device resolve_device(const std::string& name, int local_rank, const std::string& where) {
  const int gpus = compat::cuda_device_count();
  const std::string cuda_here = "cuda:" + std::to_string(local_rank);
  if (name == "auto") return gpus > 0 ? at::Device(cuda_here) : at::Device(at::kCPU);
  at::Device device(at::kCPU);
  try {
    device = at::Device(name == "cuda" ? cuda_here : name);
  } catch (const std::exception&) {
    throw usage_failure(where + ": [run] device = \"" + name +
                        "\" is not a device; use \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"");
  }
  if (!device.is_cpu() && !device.is_cuda())
    throw usage_failure(where + ": [run] device = \"" + name + "\" is not supported; use \"cpu\" or \"cuda[:N]\"");
  if (device.is_cuda() && gpus == 0)
    throw usage_failure(where + ": [run] device = \"" + name + "\" but " +
                        (at::hasCUDA() ? "no GPU is visible (check CUDA_VISIBLE_DEVICES and the driver)"
                                       : "this LibTorch build has no CUDA") +
                        "; use device = \"cpu\" or \"auto\"");
  if (device.is_cuda() && device.index() >= gpus)
    throw usage_failure(where + ": [run] device = \"" + name + "\" but only " + std::to_string(gpus) +
                        " GPU(s) are visible (cuda:0 .. cuda:" + std::to_string(gpus - 1) +
                        "); under a launcher, use \"cuda\" so LOCAL_RANK picks the GPU");
  return device;
}

Precision parse_precision(const std::string& name, const std::string& where) {
  if (name == "fp32") return Precision::fp32;
  if (name == "tf32") return Precision::tf32;
  if (name == "bf16") return Precision::bf16;
  throw usage_failure(where + ": [run] precision = \"" + name + "\" is not a precision; use \"fp32\", \"tf32\" or \"bf16\"");
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

void apply_precision(Precision precision, const at::Device& device) {
  compat::allow_tf32(precision == Precision::tf32);
  if (precision == Precision::tf32 && !device.is_cuda())
    spdlog::warn("[run] precision = \"tf32\" changes CUDA matmuls only; on {} this run computes in fp32", device.str());
}

void apply_determinism(bool deterministic) {
  if (!deterministic) return;
  // cuBLAS reproducibility needs a fixed workspace, read when its first handle is created
  // (CUDA documentation, cuBLAS "Results reproducibility"). A value the user set wins.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

AutocastScope::AutocastScope(Precision precision, const at::Device& device) {
  if (precision != Precision::bf16) return;
  active_ = true;
  type_ = device.type();
  was_enabled_ = compat::autocast_enabled(type_);
  was_dtype_ = compat::autocast_dtype(type_);
  compat::set_autocast(type_, true, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cast weights are cached for the scope's lifetime; drop them once the outermost ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast(type_, was_enabled_, was_dtype_);
}

}  // namespace loom
