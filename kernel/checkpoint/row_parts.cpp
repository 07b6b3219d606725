#include "checkpoint/row_parts.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "checkpoint/tensor_pieces.hpp"

namespace loom {

int64_t first_held_row(int64_t rows, int64_t rank, int64_t ranks) {
  // 128 bits: a table's row count read from a file times a rank must not overflow.
  return static_cast<int64_t>(static_cast<__int128>(rows) * rank / ranks);
}

int64_t held_row_count(int64_t rows, int64_t rank, int64_t ranks) {
  return first_held_row(rows, rank + 1, ranks) - first_held_row(rows, rank, ranks);
}

RowPartJoin::RowPartJoin(const nlohmann::json& layout, int64_t writer_ranks, std::optional<RowWindow> window)
    : writer_ranks_(writer_ranks), window_(window) {
  if (!layout.contains("rows")) return;
  constexpr int64_t kMaxRows = int64_t(1) << 48;
  for (const auto& [name, value] : layout.at("rows").items()) {
    Table t;
    t.rows = json_integer(value, "the row count of " + name);
    if (t.rows < 0 || t.rows > kMaxRows) throw std::runtime_error("table " + name + " of " + value.dump() + " rows");
    t.want_rows = t.rows;
    if (window_) {
      t.want_first = first_held_row(t.rows, window_->rank, window_->ranks);
      t.want_rows = held_row_count(t.rows, window_->rank, window_->ranks);
    }
    tables_[name] = std::move(t);
  }
}

bool RowPartJoin::needs_part(int64_t rank) const {
  if (!window_) return true;
  for (const auto& [name, t] : tables_) {
    const int64_t first = first_held_row(t.rows, rank, writer_ranks_), count = held_row_count(t.rows, rank, writer_ranks_);
    if (count > 0 && first < t.want_first + t.want_rows && t.want_first < first + count) return true;
  }
  return false;
}

void RowPartJoin::take(const LoadedCheckpoint& part, const nlohmann::json& part_info, int64_t rank,
                       const std::string& folder) {
  const nlohmann::json rows = part_info.value("rows", nlohmann::json::object());
  if (rows.size() != tables_.size()) throw std::runtime_error(folder + ": rows of other tables than rank 0's layout names");
  for (auto& [name, t] : tables_) {
    if (!rows.contains(name)) throw std::runtime_error(folder + " has no rows of " + name);
    const int64_t first = json_integer(rows.at(name).at(0), "the first row of " + name);
    const int64_t count = json_integer(rows.at(name).at(1), "the row count of " + name);
    if (first != first_held_row(t.rows, rank, writer_ranks_) || count != held_row_count(t.rows, rank, writer_ranks_))
      throw std::runtime_error(folder + " holds rows [" + std::to_string(first) + ", +" + std::to_string(count) + ") of " +
                               name + ", not its share of " + std::to_string(t.rows) + " rows over " +
                               std::to_string(writer_ranks_) + " ranks");
    const auto it = part.tensors.find(kShardRowsPrefix + name);
    if (it == part.tensors.end()) throw std::runtime_error(folder + " has no " + kShardRowsPrefix + name);
    const at::Tensor& piece = it->second;
    if (piece.dim() < 1 || piece.size(0) != count)
      throw std::runtime_error(folder + " " + kShardRowsPrefix + name + " does not have " + std::to_string(count) + " rows");
    if (!t.pieces.empty() && (piece.scalar_type() != t.pieces.front().scalar_type() ||
                              piece.sizes().slice(1) != t.pieces.front().sizes().slice(1)))
      throw std::runtime_error(folder + " " + kShardRowsPrefix + name + " differs in dtype or row shape from rank 0's");
    ++t.parts_taken;
    // Keep the part's rows inside the window (all rows without one).
    const int64_t from = std::max(first, t.want_first), to = std::min(first + count, t.want_first + t.want_rows);
    if (to > from) t.pieces.push_back(piece.narrow(0, from - first, to - from));
    else if (t.pieces.empty()) t.pieces.push_back(piece.narrow(0, 0, 0));  // at::cat needs one, for the dtype
  }
}

void RowPartJoin::finish(LoadedCheckpoint& out) {
  for (auto& [name, t] : tables_) {
    if (!window_ && t.parts_taken != writer_ranks_)
      throw std::runtime_error("the rows of " + name + " come from " + std::to_string(t.parts_taken) + " of " +
                               std::to_string(writer_ranks_) + " parts");
    at::Tensor joined = at::cat(t.pieces);
    t.pieces.clear();
    if (joined.size(0) != t.want_rows)
      throw std::runtime_error("the parts hold " + std::to_string(joined.size(0)) + " of the " +
                               std::to_string(t.want_rows) + " rows of " + name + " asked for");
    out.tensors[name] = std::move(joined);
    if (window_) out.rows_windowed.insert(name);
  }
}

}  // namespace loom
