// partial_tasks.hpp: how many tasks a row loop splits into when each task sums its rows' share
// of a weight's gradient into its own partial row (the norms' backward passes).
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace loom_ops::cpu {

// One a thread, but no more than the rows, and none with under 32K values (LibTorch's own
// elementwise grain): a small tensor's rows stay on the calling thread, which then starts no
// parallel region (waking the other threads costs more than their share of the work, and where
// processes share the cores, each start waits for a thread that another process holds).
inline int64_t partial_tasks(int64_t rows, int64_t columns) {
  const int64_t by_size = rows * columns / 32768;
  return std::max<int64_t>(1, std::min<int64_t>({static_cast<int64_t>(at::get_num_threads()), rows, by_size}));
}

}  // namespace loom_ops::cpu
