// row_blocks.hpp: how many blocks the row-per-block kernels (the fused norms) start, for the
// kernels and for the ATen side that sizes their per-block outputs. Plain C++.
#pragma once

#include <cstdint>

namespace loom_ops::cuda {

// Forward: one block a row, at most 65535 (a grid-stride loop covers the rest).
inline unsigned row_forward_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < 65535 ? (rows > 0 ? rows : 1) : 65535);
}

// Backward: at most 512 blocks (several per SM on an H100's 132), each summing its rows' share
// of the weights' gradients into its own row of a partial buffer, which the caller sizes with
// this and sums.
inline int64_t row_partial_blocks(int64_t rows) { return rows < 512 ? (rows > 0 ? rows : 1) : 512; }

}  // namespace loom_ops::cuda
