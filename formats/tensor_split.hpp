// tensor_split.hpp: how a parameter is cut over a tensor-parallel group ([distributed]
// tensor_parallel = size, loom_param_view.split_dim and split_blocks) and how the pieces make
// the whole again. Shared by the host (checkpoints, export, init_from) and the plugins that
// load weights (hf_causal_lm).
//
// Along `dim` the whole tensor is `blocks` equal blocks side by side (GPT-2's fused c_attn:
// q, k and v, 3 blocks), and each block is cut into `size` equal pieces. Rank r holds its
// piece of every block, in block order. With one block that is the plain cut: the whole is the
// ranks' pieces concatenated along dim.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace loom::formats {

struct TensorSplit {
  int64_t dim = -1;    // -1: not split
  int64_t blocks = 1;  // at least 1
};

using TensorSplits = std::map<std::string, TensorSplit>;  // parameter name -> its split

// Whether `whole` can be cut into `size` pieces as `split` says (its dimension exists and
// blocks * size divide its length).
bool splits_evenly(const at::Tensor& whole, const TensorSplit& split, int64_t size);

// Piece `rank` of `size` of `whole`, contiguous. Throws std::runtime_error naming `name` when
// splits_evenly is false.
at::Tensor piece_of(const at::Tensor& whole, const TensorSplit& split, int64_t rank, int64_t size,
                    const std::string& name);

// The whole tensor from every rank's piece, in rank order. Throws std::runtime_error naming
// `name` when the pieces differ in rank, dtype or any dimension but the split one, or when a
// piece's split dimension is not a multiple of the blocks.
at::Tensor join_pieces(const std::vector<at::Tensor>& pieces, const TensorSplit& split, const std::string& name);

}  // namespace loom::formats
