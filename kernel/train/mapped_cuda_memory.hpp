// mapped_cuda_memory.hpp: CUDA buffers whose physical memory comes and goes under fixed addresses
// (the driver's virtual memory management: cuMemAddressReserve, cuMemCreate + cuMemMap,
// cuMemUnmap), so that [distributed] shard = "parameters" gives back a layer's weights on a GPU
// as madvise does on the CPU (train/cpu_memory.hpp release_memory). The model's tensors,
// autograd's saved references and the flat layout keep their addresses; only the memory under
// them goes. (PyTorch's own expandable segments grow the caching allocator the same way.)
//
// Memory is mapped in granules (the driver's minimum, 2 MiB on current GPUs). Releasing a range
// unmaps the granules wholly inside it, but only once the work queued on the device's current
// stream before the release has finished: an event is recorded and checked at later calls, so
// the host does not wait for the GPU; at most kReleasesInFlight releases wait at once, the
// oldest then waited for. Granules a range shares with a neighbour stay mapped, as pages do on
// the CPU. Acquiring a range, which must come before anything writes it again, maps every granule
// it touches that is not mapped (and keeps any whose release is still waiting); fresh memory
// holds undefined values until written. Unmapped granules' memory is kept for the next mapping
// up to the largest acquire seen, and given back to the driver beyond it.
//
// Reading or writing an unmapped granule is a device fault (an illegal address), never a silent
// wrong number.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace loom {

// The granule arithmetic, apart from the driver so that it is tested on every machine.
struct GranuleSpan {
  int64_t first = 0, last = 0;  // granules [first, last)
  int64_t count() const { return last > first ? last - first : 0; }
};
// The granules wholly inside bytes [begin, end) of a buffer, and those the range touches.
GranuleSpan granules_inside(int64_t begin, int64_t end, int64_t granule);
GranuleSpan granules_touching(int64_t begin, int64_t end, int64_t granule);

constexpr int kReleasesInFlight = 4;

// Whether this build can map CUDA memory (it has the CUDA runtime; a CPU-only build cannot).
bool mapped_cuda_memory_built();

// A zeroed flat CUDA tensor of numel elements of dtype on device, every granule mapped; its
// memory is given back when the tensor (and every view of it) is gone. zero_on_map: a granule
// mapped again holds zeros (a gradient buffer, which reads as zeros where it was given back,
// as on the CPU); otherwise undefined values until written (weights, gathered before use).
// Throws a runtime Failure naming what the driver said when it cannot reserve or map.
at::Tensor mapped_cuda_zeros(int64_t numel, at::ScalarType dtype, const at::Device& device, bool zero_on_map);
// The same with no granule mapped: every range must be acquired before it is read or written (a
// sliced start maps only the rank's slice, train/sliced_start.hpp). No memory is taken yet.
at::Tensor mapped_cuda_reserved(int64_t numel, at::ScalarType dtype, const at::Device& device, bool zero_on_map);

// When range (a contiguous view) lies inside a mapped_cuda_zeros tensor: releases or acquires
// it as above and returns true; false otherwise (nothing done).
bool release_mapped(const at::Tensor& range);
bool acquire_mapped(const at::Tensor& range);

// Bytes of physical memory mapped now and the most mapped at once, over every such tensor (the
// memory kept for the next mapping not included), and the bytes those tensors span.
int64_t mapped_cuda_bytes();
int64_t peak_mapped_cuda_bytes();
int64_t reserved_cuda_bytes();

}  // namespace loom
