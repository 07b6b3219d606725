// sharded_checkpoint.hpp: a checkpoint written by every rank of a sharded run ([distributed]
// shard). Each rank writes its own folder, rank-<R>/, through the backend; rank 0's also holds
// what is not sharded (RNG, data positions, hooks, trackers) and the layout below. Reading
// consolidates: the slices are put back into whole tensors under the names an unsharded
// checkpoint uses (model/<param>, optimizer/<state>), so resume, inspect, export and
// evaluation read both kinds alike, and a resume at another world size or shard mode
// simply takes its own slices of the whole tensors.
//
// Layout (rank 0's metadata, key "shard"): {"mode", "world_size", "groups": [{"dtype",
// "numel", "segments": [[name, offset, numel, [shape...]], ...]}], "elementwise": {state name:
// group}}. Every rank's metadata, key "part": {"rank", "slices": [[start, length] per group]}.
// Tensors in a part: shard/params.<group> and shard/optimizer/<state> (elementwise state).
// Tables split by rows (sparse_tables = "row_sharded") add "rows" to both: row_parts.hpp.
//
// A tensor-parallel run ([distributed] tensor_parallel = T) with a shard mode writes one such
// set per tensor rank, tensor-<t>/rank-<R>/, each over its own pieces; every part's metadata
// also has "tensor_parallel": {"size", "rank", "split": {parameter: dimension or {"dim", "blocks"}}}. Reading joins
// the T sets into whole tensors (tensor_pieces.hpp), so such a checkpoint reads like any other.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/row_parts.hpp"

namespace loom {

inline constexpr const char* kShardParamsPrefix = "shard/params.";
inline constexpr const char* kShardOptimizerPrefix = "shard/optimizer/";

// "rank-00003": the folder of one rank's part.
std::string rank_folder_name(int rank);

// "tensor-00001": the folder of one tensor rank's parts.
std::string tensor_folder_name(int tensor_rank);

// Whether dir holds a sharded checkpoint (a rank-00000 folder).
bool is_sharded_checkpoint(const std::filesystem::path& dir);

// The checkpoint in dir as whole tensors, sharded or not. Every slice is checked against the
// layout (bounds, dtype, coverage) before it is copied; throws a runtime Failure naming the
// file and what does not fit. With a window, tables split by rows come back as that window's
// rows only (named in rows_windowed), and parts holding none of them are not read.
LoadedCheckpoint read_checkpoint(CheckpointBackendInstance& backend, const std::filesystem::path& dir,
                                 std::optional<RowWindow> window = std::nullopt);

}  // namespace loom
