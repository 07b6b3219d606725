// moe_permutation_cpu.hpp: the CPU loops of moe_permute and moe_combine (fp32, contiguous),
// each over a range of rows so that at::parallel_for can split them. Compiled with
// -ffp-contract=off: each product rounds before it is added, as the composition rounds it.
#pragma once

#include <cstdint>

namespace loom_ops::cpu {

// rows[i] = x[order[i] / k] for positions i in [begin, end); rows of C floats.
void moe_gather_rows(const float* x, const int64_t* order, int64_t k, int64_t C, float* rows, int64_t begin,
                     int64_t end);

// For tokens n in [begin, end): out[n] = the sum, in position order, of rows[inverse[n k + j]]
// times weight[n k + j] (times 1 when weight is null), j < k.
void moe_sum_rows(const float* rows, const int64_t* inverse, const float* weight, int64_t k, int64_t C, float* out,
                  int64_t begin, int64_t end);

// moe_combine's backward for positions i in [begin, end), pair p = order[i] of token p / k:
// drows[i] = dout[p / k] * top[p], dtop[p] = dot(dout[p / k], rows[i]).
void moe_combine_backward(const float* dout, const float* rows, const int64_t* order, const float* top, int64_t k,
                          int64_t C, float* drows, float* dtop, int64_t begin, int64_t end);

}  // namespace loom_ops::cpu
