// saved_world.cpp: the prelude of a run resumed at another world size (saved_world.hpp).
#include "plugins/datasets/parquet/saved_world.hpp"

#include <algorithm>
#include <string>

#include "plugins/datasets/common/data_error.hpp"

namespace loom::parquet_data {

namespace {

// Items beyond this are refused: a damaged record must not make the host list billions of units.
constexpr uint64_t kMaxPreludeItems = uint64_t(1) << 26;

}  // namespace

Prelude deal_prelude(const std::vector<StreamPosition>& saved, uint64_t units, uint32_t rank, uint32_t world,
                     uint64_t seq_len) {
  const uint64_t S = saved.size();
  const std::string damaged = "; the checkpoint's data positions are damaged or were written for other data";
  if (S == 0 || S > units)
    throw data::bad_input("the checkpoint holds " + std::to_string(S) + " ranks' data positions over " + std::to_string(units) +
                          " row groups" + damaged);
  Prelude out;
  uint64_t first = UINT64_MAX;
  for (const StreamPosition& p : saved) {
    out.epoch = std::max(out.epoch, p.epoch);
    first = std::min(first, p.epoch);
  }
  if (out.epoch - first > kMaxSavedEpochSpread)
    throw data::bad_input("the saved ranks stand " + std::to_string(out.epoch - first) + " epochs apart" + damaged);
  const auto share = [&](uint64_t r) { return (units - r + S - 1) / S; };  // saved rank r's units per epoch
  uint64_t left = 0;
  for (uint64_t r = 0; r < S; ++r) {
    const StreamPosition& p = saved[r];
    if (p.block >= share(r) || p.carry.size() > seq_len)
      throw data::bad_input("saved rank " + std::to_string(r) + "'s data position (block " + std::to_string(p.block) + " of " +
                            std::to_string(share(r)) + ") cannot be one of its" + damaged);
    left += share(r) - p.block - 1 + (out.epoch - p.epoch) * share(r);
  }
  if (left > kMaxPreludeItems) throw data::bad_input("the saved ranks left " + std::to_string(left) + " row groups to deal" + damaged);

  for (uint64_t r = rank; r < S; r += world) {  // the blocks in progress this rank continues
    const StreamPosition& p = saved[r];
    out.items.push_back({p.epoch, p.block * S + r, true, p.window, p.carry});
  }
  std::vector<std::pair<uint64_t, uint64_t>> unstarted;  // (epoch, slot) of every unit not begun
  unstarted.reserve(size_t(left));
  for (uint64_t r = 0; r < S; ++r)
    for (uint64_t later = 0; later <= out.epoch - saved[r].epoch; ++later) {  // counted: no epoch + 1 can wrap
      const uint64_t e = saved[r].epoch + later;
      for (uint64_t k = later == 0 ? saved[r].block + 1 : 0; k < share(r); ++k) unstarted.emplace_back(e, k * S + r);
    }
  std::sort(unstarted.begin(), unstarted.end());
  for (uint64_t i = rank; i < unstarted.size(); i += world) out.items.push_back({unstarted[i].first, unstarted[i].second});
  return out;
}

}  // namespace loom::parquet_data
