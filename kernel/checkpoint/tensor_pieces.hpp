// tensor_pieces.hpp: whole tensors from the pieces of a tensor-parallel run
// ([distributed] tensor_parallel = T), in the order of the tensor group's ranks. Used when a
// run gathers its pieces before an unsharded save (train/tensor_parallel_checkpoint.cpp) and
// when a reader joins the T sets of parts of a sharded save (sharded_checkpoint.cpp).
//
// A split parameter is its pieces joined along its split dimension (formats/tensor_split.hpp:
// side by side, or block by block for a fused q/k/v). An elementwise
// optimizer state is a flat buffer laid out as its group's segments; every rank's buffer has
// the same segments (only split ones are smaller, by T), so the whole one is built segment by
// segment: a split segment from every rank's piece, a whole one from rank 0's.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "formats/tensor_split.hpp"

namespace loom {

struct SegmentShape {
  std::string name;
  int64_t offset = 0, numel = 0;
  std::vector<int64_t> shape;  // this rank's piece
};

// A JSON integer from a file: refused (std::runtime_error naming `what`) when it is anything
// else, a float included, since converting one out of int64's range is undefined.
int64_t json_integer(const nlohmann::json& value, const std::string& what);
std::vector<int64_t> json_integers(const nlohmann::json& values, const std::string& what);

// The splits as a checkpoint's metadata keeps them ("tensor_parallel" "split"): parameter ->
// its dimension, or {"dim", "blocks"} for a split in blocks; and back, refusing (std::runtime_error)
// anything else.
nlohmann::json splits_json(const formats::TensorSplits& splits);
formats::TensorSplits splits_from_json(const nlohmann::json& split);

// split: how each split parameter is cut (absent: whole). Throws std::runtime_error when a
// segment does not fit the buffers or its shape.
at::Tensor join_flat_pieces(const std::vector<at::Tensor>& flats, const std::vector<SegmentShape>& segments,
                            const formats::TensorSplits& split);

using TensorsByName = std::map<std::string, at::Tensor>;

// The tensors of one checkpoint from the consolidated sets of the T tensor ranks (set t: the
// whole tensors of rank t's sharded parts), as sharded_checkpoint.hpp describes them; metadata:
// set 0's, with "tensor_parallel" {"size", "split"} and "shard" (its layout). Everything not
// split is set 0's. Throws std::runtime_error naming what does not fit; files from elsewhere
// get here, so every size is checked before a tensor is cut or joined.
TensorsByName join_tensor_sets(const std::vector<TensorsByName>& sets, const nlohmann::json& metadata);

}  // namespace loom
