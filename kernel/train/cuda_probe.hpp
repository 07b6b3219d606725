// cuda_probe.hpp: what the trainer asks of CUDA itself, beyond tensors: the device's name (for
// MFU's datasheet peak), the caching allocator's peak, and proof that a training step never
// makes the host wait for the GPU. Where Loom was built without the CUDA toolkit
// (LOOM_WITH_CUDA unset) they answer "unknown". With LOOM_CUDA_SYNC_CHECK=1 in the environment, a CUDA run holds a NoHostSyncScope across every
// step after the first that reads nothing back (step_values.hpp): PyTorch's sync debug mode
// (what torch.cuda.set_sync_debug_mode("error") sets) then turns any operation that waits for
// the device into an error naming it. tests/gpu runs with it; a user never needs it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace loom {

// The CUDA device's name as the driver gives it ("NVIDIA H100 80GB HBM3"), or "" when unknown.
std::string cuda_device_name(const at::Device& device);

// The most memory LibTorch's caching allocator has handed out on device since the process
// began (torch.cuda.max_memory_allocated), in bytes; -1 when unknown.
int64_t cuda_peak_allocated_bytes(const at::Device& device);

// The device's memory in bytes as the driver gives it (cudaMemGetInfo's total), or -1 when unknown.
int64_t cuda_total_bytes(const at::Device& device);

// Caps LibTorch's caching allocator on device at this share of its memory
// (torch.cuda.set_per_process_memory_fraction): an allocation past it fails as if the device
// were that small. False where Loom was built without the CUDA toolkit.
bool cap_cuda_memory(const at::Device& device, double fraction);

// Whether LOOM_CUDA_SYNC_CHECK=1 asks for the check. Where Loom was built without the CUDA
// toolkit the check cannot run, and the run says so once.
bool cuda_sync_check_requested();

class NoHostSyncScope {
 public:
  explicit NoHostSyncScope(bool active);
  ~NoHostSyncScope();
  NoHostSyncScope(const NoHostSyncScope&) = delete;
  NoHostSyncScope& operator=(const NoHostSyncScope&) = delete;

 private:
  bool active_;
};

}  // namespace loom
