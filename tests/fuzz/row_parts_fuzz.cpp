// row_parts_fuzz.cpp: putting a row-sharded checkpoint's tables back together,
// kernel/checkpoint/row_parts.hpp RowPartJoin (what sharded_checkpoint.cpp does with the rows of
// each rank's part, whole or for one rank of another run).
//
// The input is JSON: {"layout": rank 0's "shard" metadata (its "world_size" and "rows"),
// "parts": [each rank's "part" metadata], "window": [rank, ranks] or absent}. The target makes
// the tensors each part's metadata describes, as a reader would find them: shard/rows/<name> of
// [row count, 2] holding the row numbers (capped at 4096 rows), then joins. Documented refusal:
// std::runtime_error, and nlohmann's json exceptions (read_parts turns both into one line). A
// join that succeeds must give every table exactly the rows asked for, in order.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/row_parts.hpp"
#include "checkpoint/tensor_pieces.hpp"
#include "fuzz_support.hpp"

namespace {

constexpr int64_t kMaxRows = 4096;

// A part's tensors as its metadata describes them, where that is plausible enough to make.
loom::LoadedCheckpoint make_part(const nlohmann::json& info) {
  loom::LoadedCheckpoint part;
  try {
    for (const auto& [name, range] : info.at("rows").items()) {
      const int64_t first = loom::json_integer(range.at(0), "first"), count = loom::json_integer(range.at(1), "count");
      if (count < 0 || count > kMaxRows || first < 0 || first > (int64_t(1) << 40)) continue;
      const at::Tensor rows = at::arange(first, first + count, at::kLong).to(at::kDouble);
      part.tensors[loom::kShardRowsPrefix + name] = at::stack({rows, rows}, 1);
    }
  } catch (const std::exception&) {  // then only what was made so far
  }
  return part;
}

void join(const nlohmann::json& input) {
  const nlohmann::json& layout = input.at("layout");
  const int64_t world = std::clamp<int64_t>(loom::json_integer(layout.at("world_size"), "world_size"), 1, 8);
  std::optional<loom::RowWindow> window;
  if (input.contains("window")) {
    const int64_t ranks = std::clamp<int64_t>(loom::json_integer(input["window"].at(1), "ranks"), 1, 8);
    window = loom::RowWindow{std::clamp<int64_t>(loom::json_integer(input["window"].at(0), "rank"), 0, ranks - 1), ranks};
  }
  loom::RowPartJoin rows(layout, world, window);
  const nlohmann::json& parts = input.at("parts");
  for (int64_t rank = 0; rank < world; ++rank) {
    if (rank != 0 && !rows.needs_part(rank)) continue;
    const nlohmann::json info = rank < static_cast<int64_t>(parts.size()) ? parts[static_cast<size_t>(rank)] : nlohmann::json::object();
    rows.take(make_part(info), info, rank, "rank-" + std::to_string(rank));
  }
  loom::LoadedCheckpoint out;
  rows.finish(out);
  for (const auto& [name, total] : layout.at("rows").items()) {
    const int64_t T = loom::json_integer(total, "rows");
    const int64_t first = window ? loom::first_held_row(T, window->rank, window->ranks) : 0;
    const int64_t count = window ? loom::held_row_count(T, window->rank, window->ranks) : T;
    const auto it = out.tensors.find(name);
    if (it == out.tensors.end()) {
      loom_fuzz::finding("table \"" + name + "\" missing after a join that succeeded");
      continue;
    }
    const at::Tensor expected = at::arange(first, first + count, at::kLong).to(at::kDouble);
    if (it->second.size(0) != count || !it->second.select(1, 0).equal(expected))
      loom_fuzz::finding("table \"" + name + "\" joined to other rows than asked for");
    if (window.has_value() != (out.rows_windowed.count(name) == 1))
      loom_fuzz::finding("table \"" + name + "\" not named as windowed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json input = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded() || !input.is_object()) return 0;
  loom_fuzz::expect_only<std::runtime_error>("RowPartJoin", [&] {
    try {
      join(input);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(e.what());  // read_parts reports these as it reports its own
    }
  });
  return 0;
}
