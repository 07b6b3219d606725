// moe_permutation_math.hpp: which rows make up one token's sums, shared by the CPU loops and the
// CUDA kernels. Token n's k pairs are n k .. n k + k - 1; inverse[pair] is the pair's position
// among the sorted rows. The composition's index_add adds rows in position order, so the fused
// sums walk each token's positions in that order too.
#pragma once

#include <cstdint>

#include "../cuda_common/host_device.hpp"

namespace loom_ops::moe_permutation_math {

// Larger top-k (none of the models we read has more than 8) goes to the reference.
constexpr int kMaxChoices = 32;

// Token n's positions in ascending order, and the pair each belongs to (k <= kMaxChoices).
LOOM_OPS_HOST_DEVICE inline void token_positions(const int64_t* inverse, int64_t n, int k, int64_t* position,
                                                 int64_t* pair) {
  for (int j = 0; j < k; ++j) {
    const int64_t p = n * k + j, at_position = inverse[p];
    int i = j;
    for (; i > 0 && position[i - 1] > at_position; --i) {  // insertion: k is small
      position[i] = position[i - 1];
      pair[i] = pair[i - 1];
    }
    position[i] = at_position;
    pair[i] = p;
  }
}

}  // namespace loom_ops::moe_permutation_math
