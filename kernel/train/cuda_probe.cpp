#include "train/cuda_probe.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>

#ifdef LOOM_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace loom {

#ifdef LOOM_WITH_CUDA
namespace {
c10::DeviceIndex index_of(const at::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
}  // namespace
#endif

std::string cuda_device_name(const at::Device& device) {
#ifdef LOOM_WITH_CUDA
  cudaDeviceProp properties{};
  if (device.is_cuda() && cudaGetDeviceProperties(&properties, index_of(device)) == cudaSuccess) return properties.name;
#endif
  (void)device;
  return "";
}

int64_t cuda_peak_allocated_bytes(const at::Device& device) {
#ifdef LOOM_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  return -1;
}

int64_t cuda_total_bytes(const at::Device& device) {
#ifdef LOOM_WITH_CUDA
  size_t free = 0, total = 0;
  if (device.is_cuda() && cudaSetDevice(index_of(device)) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess)
    return static_cast<int64_t>(total);
#endif
  (void)device;
  return -1;
}

bool cap_cuda_memory(const at::Device& device, double fraction) {
#ifdef LOOM_WITH_CUDA
  if (!device.is_cuda()) return false;
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index_of(device));
  return true;
#else
  (void)device;
  (void)fraction;
  return false;
#endif
}

bool cuda_sync_check_requested() {
  static const bool requested = [] {
    const char* value = std::getenv("LOOM_CUDA_SYNC_CHECK");
    const bool on = value != nullptr && std::strcmp(value, "1") == 0;
#ifndef LOOM_WITH_CUDA
    if (on) spdlog::warn("LOOM_CUDA_SYNC_CHECK=1 ignored: this host was built without the CUDA toolkit");
    return false;
#else
    return on;
#endif
  }();
  return requested;
}

NoHostSyncScope::NoHostSyncScope(bool active) : active_(active) {
#ifdef LOOM_WITH_CUDA
  if (active_) c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
#endif
}

NoHostSyncScope::~NoHostSyncScope() {
#ifdef LOOM_WITH_CUDA
  if (active_) c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
#endif
}

}  // namespace loom
