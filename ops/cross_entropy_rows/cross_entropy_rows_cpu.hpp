// cross_entropy_rows_cpu.hpp: the CPU loops of cross_entropy_rows, on raw fp32 pointers.
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

// One row x of n values, its target in [0, n): returns logsumexp(x) - x[target]; with
// write_gradient, x becomes softmax(x) - one_hot(target).
float cross_entropy_row(float* x, int64_t n, int64_t target, bool write_gradient);

}  // namespace loom_ops::cpu
