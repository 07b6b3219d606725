#include "train/cpu_memory.hpp"

#include <malloc.h>

namespace loom {

void keep_freed_cpu_memory() {
#if defined(__GLIBC__)
  // M_MMAP_THRESHOLD's ceiling on 64-bit glibc is HEAP_MAX_SIZE / 2 = 32 MiB (mallopt(3)).
  // Setting either option also turns off glibc's own threshold adaptation, which is what
  // we want: its adaptation trims the heap top after large frees.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 0x7fffffff);  // largest int: never give the heap top back
#endif
}

}  // namespace loom
