// cpu_memory.hpp: how the process keeps freed CPU memory (run.cpu_memory_cache), and how a
// sharded run gives back the memory under what it does not own.
#pragma once

#include <cstdint>

namespace loom {

// Tunes glibc malloc so that a training step reuses the memory the previous step freed:
// blocks up to 32 MiB come from the heap instead of fresh mmaps, and the heap is never
// trimmed back to the OS. LibTorch's CPU allocator frees every activation after backward, and
// with glibc's defaults each step then page-faults its activations in again (about 40,000
// minor faults, 160 MB, per step for the 6-layer, 384-wide gpt of tools/bench/compare).
// The cost: the process keeps its peak heap. Safe to call at any time; affects later frees.
void keep_freed_cpu_memory();

// Returns the whole free pages inside the heap to the OS (glibc's malloc_trim), which
// keep_freed_cpu_memory's setting otherwise keeps: after a burst of large frees that will not
// recur, such as a model's initial values dropped one by one while small allocations land in
// between (so that the holes they leave no longer fit the next value).
void return_free_heap_pages();

// The most memory this process has had resident so far (Linux: VmHWM of /proc/self/status),
// in bytes; -1 where the system does not say.
int64_t peak_resident_bytes();

}  // namespace loom

#include <ATen/ATen.h>

namespace loom {

// Gives back the memory under a range of a live buffer that will not be read before it is
// written again (a sharded rank's copy of weights or gradients it does not own). On the CPU
// the whole pages inside the range are returned to the OS (madvise MADV_DONTNEED: they read as
// zeros when touched again); the bytes at the range's ends that share a page with
// neighbouring data stay. zeroed: make the whole range read as zeros afterwards (the partial
// pages at the ends are zeroed by hand), as a gradient buffer must before backward adds into it.
// On CUDA, a range of a buffer under mapped addresses (train/mapped_cuda_memory.hpp) is zeroed
// first if asked and then released there (which needs it acquired before it is written again);
// on other devices and CUDA buffers nothing is given back, and zeroed still zeroes the range.
void release_memory(const at::Tensor& range, bool zeroed);

// A CPU tensor of this shape and dtype in memory of its own (an anonymous mapping, unmapped
// with the tensor), which holds no page until written: fresh allocator memory may sit on
// pages that earlier tensors drew in.
at::Tensor untouched_cpu_tensor(at::IntArrayRef sizes, at::ScalarType dtype);

}  // namespace loom
