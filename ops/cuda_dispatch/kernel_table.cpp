#include "kernel_table.hpp"

#include <loom_ops/cuda_kernels.hpp>

#include <atomic>

namespace loom_ops {
namespace cuda_dispatch {
namespace {
std::atomic<const KernelTable*> table{nullptr};
}  // namespace

const KernelTable* installed() { return table.load(std::memory_order_acquire); }
void install(const KernelTable* t) { table.store(t, std::memory_order_release); }

}  // namespace cuda_dispatch

bool cuda_kernels_in_use() { return cuda_dispatch::installed() != nullptr; }

}  // namespace loom_ops
