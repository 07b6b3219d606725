#include "train/cpu_memory.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "base/failure.hpp"
#include "train/mapped_cuda_memory.hpp"

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

void return_free_heap_pages() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kib = 0;
  while (status >> key) {
    if (key == "VmHWM:" && status >> kib) return kib * 1024;  // the kernel writes "VmHWM:  1234 kB"
    status.ignore(1 << 12, '\n');
  }
  return -1;
}

void release_memory(const at::Tensor& range, bool zeroed) {
  if (range.numel() == 0) return;
  if (!range.device().is_cpu() || !range.is_contiguous()) {
    if (zeroed) at::Tensor(range).zero_();
    release_mapped(range);  // CUDA memory under fixed addresses: unmapped once the GPU is past it
    return;
  }
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(range.data_ptr());
  const uintptr_t end = begin + range.nbytes();
  const uintptr_t first_page = (begin + page - 1) / page * page, last_page = end / page * page;
  if (last_page <= first_page) {  // no whole page inside
    if (zeroed) at::Tensor(range).zero_();
    return;
  }
  if (::madvise(reinterpret_cast<void*>(first_page), last_page - first_page, MADV_DONTNEED) != 0)
    throw runtime_failure("releasing sharded memory: madvise failed");
  if (!zeroed) return;
  const int64_t item = range.element_size();
  // The element counts before the first whole page and after the last one.
  const auto head = static_cast<int64_t>((first_page - begin) / static_cast<uintptr_t>(item));
  const auto tail_start = static_cast<int64_t>((last_page - begin) / static_cast<uintptr_t>(item));
  at::Tensor all = range;
  if (head > 0) all.narrow(0, 0, head).zero_();
  if (tail_start < all.numel()) all.narrow(0, tail_start, all.numel() - tail_start).zero_();
}

at::Tensor untouched_cpu_tensor(at::IntArrayRef sizes, at::ScalarType dtype) {
  const size_t bytes = std::max<size_t>(1, static_cast<size_t>(c10::multiply_integers(sizes)) * c10::elementSize(dtype));
  void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (at == MAP_FAILED) throw runtime_failure("mapping " + std::to_string(bytes) + " bytes of memory failed");
  return at::from_blob(at, sizes, [bytes](void* p) { ::munmap(p, bytes); }, at::TensorOptions().dtype(dtype));
}

}  // namespace loom
