// cpu_memory.hpp: how the process keeps freed CPU memory (run.cpu_memory_cache).
#pragma once

namespace loom {

// Tunes glibc malloc so that a training step reuses the memory the previous step freed:
// blocks up to 32 MiB come from the heap instead of fresh mmaps, and the heap is never
// trimmed back to the OS. LibTorch's CPU allocator frees every activation after backward, and
// with glibc's defaults each step then page-faults its activations in again (about 40,000
// minor faults, 160 MB, per step for the 6-layer, 384-wide gpt of tools/bench/compare).
// The cost: the process keeps its peak heap. Safe to call at any time; affects later frees.
void keep_freed_cpu_memory();

}  // namespace loom
