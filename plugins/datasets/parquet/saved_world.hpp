// saved_world.hpp: a `parquet` run resumed at another world size (ABI 1.20: the host hands every
// rank the positions all S saved ranks reached). Each saved rank r had read, in its own epoch
// e_r, its units up to block b_r, and window w_r of that block. The new run's ranks first read
// what the saved ranks had left, up to the end of the latest saved epoch E = max e_r (the
// "prelude"), then carry on from epoch E + 1 with units dealt over their own number:
//   - saved rank r's block in progress goes to new rank r mod M, which continues it exactly: the
//     same carry, the same window order, from window w_r on (its leftover tokens start the next
//     unit, or are dropped before another such block: fewer than seq_len + 1);
//   - every unit a saved rank had not started, in its epochs e_r .. E, is dealt round-robin over
//     the M new ranks in (epoch, place in that epoch's order) order.
// So every unit of epochs up to E is read once by the two runs together, and no window twice.
// A rank's windows of a prelude unit keep the order the saved run would have drawn (it depends
// on the unit's epoch and place only). Torch-free, SDK-free.
#pragma once

#include <cstdint>
#include <vector>

#include "plugins/datasets/parquet/document_stream.hpp"

namespace loom::parquet_data {

// Saved positions more epochs apart than this are refused as damaged (ranks read alike-sized
// shares, so theirs never drift apart by more than an epoch or two).
inline constexpr uint64_t kMaxSavedEpochSpread = 64;

struct PreludeItem {
  uint64_t epoch = 0, slot = 0;  // the unit at place `slot` of epoch `epoch`'s order
  bool in_progress = false;      // a saved rank's block in progress: starts with carry, at window
  uint64_t window = 0;
  std::vector<int32_t> carry;
};

struct Prelude {
  uint64_t epoch = 0;  // E: the new run's rank reads these items as its epoch E, then E + 1 on
  std::vector<PreludeItem> items;
};

// Rank `rank` of `world`'s prelude from the saved positions (rank r's at r) over `units` units.
// Only the blocks in progress this rank continues need their carry. Throws a bad_input DataError
// for positions no run over these units can have saved.
Prelude deal_prelude(const std::vector<StreamPosition>& saved, uint64_t units, uint32_t rank, uint32_t world,
                     uint64_t seq_len);

}  // namespace loom::parquet_data
