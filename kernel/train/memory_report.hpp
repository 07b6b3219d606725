// memory_report.hpp: what a rank holds between steps (weights, gradients, optimizer state,
// frozen weights), for the "held per rank" line, and the one line a run that ran out of device
// memory stops with: what held the memory and what to change, instead of LibTorch's trace.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

struct HeldBytes {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, frozen = 0;
  int64_t offloaded = 0;  // [distributed] offload: the optimizer's state and copies, in host memory (not in total)
  int64_t total() const { return parameters + gradients + optimizer_state + frozen; }
};

// Whether an error message is LibTorch's for a failed CUDA allocation ("CUDA out of memory",
// c10::OutOfMemoryError's words), also where a plugin's status carried it across the ABI.
bool is_device_out_of_memory(const std::string& message);

// "CUDA ran out of memory on cuda:0 during step 12 (run.gpu_memory_gib = 40): held between
// steps: ...; the allocator's peak ... GiB: activations and workspace took about ...; ..."
// cap_gib: run.gpu_memory_gib (0: none); peak_bytes: the caching allocator's peak, -1 if
// unknown; cause: LibTorch's message, its first line kept at the end.
std::string out_of_memory_line(const std::string& device, int64_t step, double cap_gib, const HeldBytes& held,
                               int64_t peak_bytes, const std::string& cause);

// The same for an allocation that failed while the run was set up (the model built, the flat
// buffers made, the optimizer's state allocated), before anything is held between steps:
// "CUDA ran out of memory on cuda:0 while the run was set up (...): the allocator's peak was ...".
// offloaded: [distributed] offload was on (then it is not suggested).
std::string setup_out_of_memory_line(const std::string& device, double cap_gib, int64_t peak_bytes, bool offloaded,
                                     const std::string& cause);

}  // namespace loom
