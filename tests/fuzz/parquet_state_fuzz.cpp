// parquet_state_fuzz.cpp: what a `parquet` dataset reads of a checkpoint: its resume record
// (plugins/datasets/parquet/stream_state.hpp decode_state), the record of every saved rank's
// state the host hands it at another world size (loom/dataset.hpp decode_saved_world, ABI 1.20)
// and the share of what those ranks had left that it deals itself (saved_world.hpp deal_prelude).
//
// The input is offered as one rank's record of a 2-rank run, and as a record of a saved world
// whose states are decoded as their ranks' and dealt to rank 1 of 3, over 12 row groups.
// Documented refusals: a DataError (decode_state, deal_prelude), a loom::Error with code
// INVALID_ARGUMENT (decode_saved_world). Anything else, or a prelude of more items than the row
// groups its epochs hold, is a finding.
#include <loom/dataset.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "plugins/datasets/common/data_error.hpp"
#include "plugins/datasets/parquet/saved_world.hpp"
#include "plugins/datasets/parquet/stream_state.hpp"

namespace {

using namespace loom::parquet_data;

constexpr uint64_t kUnits = 12, kSeqLen = 32;

StateCheck check_for(uint32_t rank, uint32_t world) { return {rank, world, true, 7, kSeqLen, 0x5eedull}; }

void deal(const std::vector<StreamPosition>& saved, uint32_t rank, uint32_t world) {
  const Prelude p = deal_prelude(saved, kUnits, rank, world, kSeqLen);
  const uint64_t bound = kUnits * (kMaxSavedEpochSpread + 1) / world + saved.size() + 1;
  if (p.items.size() > bound) loom_fuzz::finding("a prelude of " + std::to_string(p.items.size()) + " items");
  for (const PreludeItem& item : p.items)
    if (item.slot >= kUnits || item.carry.size() > kSeqLen) loom_fuzz::finding("a prelude item outside the units");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const SavedState s = decode_state(bytes, check_for(0, 2));
    if (!s.saved_world.empty()) deal(s.saved_world, 0, 2);
  } catch (const loom::data::DataError&) {
  }
  try {
    const auto records = loom::decode_saved_world(bytes);
    if (!records) return 0;
    std::vector<StreamPosition> positions;
    for (size_t r = 0; r < records->size(); ++r)
      positions.push_back(decode_state((*records)[r], check_for(uint32_t(r), uint32_t(records->size()))).position);
    deal(positions, 1, 3);
  } catch (const loom::data::DataError&) {
  } catch (const loom::Error& e) {
    if (e.code() != LOOM_STATUS_CODE_INVALID_ARGUMENT) loom_fuzz::finding(std::string("loom::Error ") + e.what());
  }
  return 0;
}
