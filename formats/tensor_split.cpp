#include "tensor_split.hpp"

#include <stdexcept>

namespace loom::formats {

bool splits_evenly(const at::Tensor& whole, const TensorSplit& split, int64_t size) {
  if (split.dim < 0 || split.dim >= whole.dim() || split.blocks < 1 || size < 1) return false;
  return whole.size(split.dim) % (split.blocks * size) == 0;
}

at::Tensor piece_of(const at::Tensor& whole, const TensorSplit& split, int64_t rank, int64_t size,
                    const std::string& name) {
  if (!splits_evenly(whole, split, size) || rank < 0 || rank >= size)
    throw std::runtime_error("\"" + name + "\" cannot be cut into " + std::to_string(size) + " pieces along dimension " +
                             std::to_string(split.dim) + (split.blocks > 1 ? " in " + std::to_string(split.blocks) +
                                                                                 " blocks" : std::string()));
  const int64_t d = split.dim, n = whole.size(d) / (split.blocks * size);
  // dim -> (blocks, size, n): this rank's n of every block.
  return whole.unflatten(d, {split.blocks, size, n}).select(d + 1, rank).flatten(d, d + 1).contiguous();
}

at::Tensor join_pieces(const std::vector<at::Tensor>& pieces, const TensorSplit& split, const std::string& name) {
  if (pieces.empty()) throw std::runtime_error("\"" + name + "\" has no pieces to join");
  const at::Tensor& first = pieces.front();
  const int64_t d = split.dim;
  if (d < 0 || d >= first.dim())
    throw std::runtime_error("\"" + name + "\" is split along dimension " + std::to_string(d) +
                             ", which its shape does not have");
  if (split.blocks < 1 || first.size(d) % split.blocks != 0)
    throw std::runtime_error("\"" + name + "\": its pieces are not " + std::to_string(split.blocks) + " equal blocks");
  for (const at::Tensor& piece : pieces) {
    if (piece.dim() != first.dim() || piece.scalar_type() != first.scalar_type())
      throw std::runtime_error("the pieces of \"" + name + "\" differ in rank or dtype");
    for (int64_t i = 0; i < first.dim(); ++i)
      if (piece.size(i) != first.size(i))
        throw std::runtime_error("the pieces of \"" + name + "\" differ in dimension " + std::to_string(i));
  }
  if (split.blocks == 1) return at::cat(pieces, d);
  // Each piece's dim -> (blocks, n); stacked after the blocks: (blocks, size, n) -> dim.
  std::vector<at::Tensor> blocked;
  for (const at::Tensor& piece : pieces) blocked.push_back(piece.unflatten(d, {split.blocks, -1}));
  return at::stack(blocked, d + 1).flatten(d, d + 2);
}

}  // namespace loom::formats
