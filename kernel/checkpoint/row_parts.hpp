// row_parts.hpp: tables split by rows over the ranks ([distributed] sparse_tables =
// "row_sharded") in a checkpoint. Every rank writes its own rows into its part (rank-<R>/,
// sharded_checkpoint.hpp), so no rank ever holds a whole table to save it. Rank R of N holds
// rows R * T / N .. (R + 1) * T / N - 1 of a table of T rows (<loom/sparse_tables.hpp>'s split).
//
// Layout: rank 0's "shard" metadata has "rows": {name: T}; every part's "part" metadata has
// "rows": {name: [first row, row count]} and holds those rows as the tensor shard/rows/<name>
// (name: model/<table> or sparse_optimizer/<state>). Reading puts the rows back together under
// `name`: whole, or only the rows one rank of another run holds (a RowWindow), in which case
// parts holding none of them are not even read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "abi/checkpoint_backend.hpp"

namespace loom {

inline constexpr const char* kShardRowsPrefix = "shard/rows/";

// The first row rank `rank` of `ranks` holds of a table of `rows` rows.
int64_t first_held_row(int64_t rows, int64_t rank, int64_t ranks);

// How many rows that rank holds.
int64_t held_row_count(int64_t rows, int64_t rank, int64_t ranks);

// The rows of every table that rank `rank` of `ranks` holds.
struct RowWindow {
  int64_t rank = 0;
  int64_t ranks = 1;
};

// Puts the row parts of one sharded save back together, checking each part against the split.
class RowPartJoin {
 public:
  // layout: rank 0's "shard" metadata; writer_ranks: its world size.
  RowPartJoin(const nlohmann::json& layout, int64_t writer_ranks, std::optional<RowWindow> window);

  // Whether part `rank` must be read for its rows (with a window, only those that overlap it).
  bool needs_part(int64_t rank) const;

  // Takes one part's rows (its "part" metadata and tensors); parts come in rank order.
  void take(const LoadedCheckpoint& part, const nlohmann::json& part_info, int64_t rank, const std::string& folder);

  // The joined rows, under their names, into `out` (and their names into out.rows_windowed with
  // a window). Throws when a part was missing.
  void finish(LoadedCheckpoint& out);

 private:
  struct Table {
    int64_t rows = 0;               // T
    int64_t want_first = 0, want_rows = 0;  // the window (or every row)
    std::vector<at::Tensor> pieces;
    int64_t parts_taken = 0;
  };
  std::map<std::string, Table> tables_;
  int64_t writer_ranks_;
  std::optional<RowWindow> window_;
};

}  // namespace loom
