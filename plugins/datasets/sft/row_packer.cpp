// row_packer.cpp: see row_packer.hpp.
#include "row_packer.hpp"

#include <algorithm>
#include <map>
#include <random>

namespace loom::sft {

namespace {

// Fisher-Yates with std::mt19937_64's raw output (the distributions are implementation-defined;
// the engine is not).
template <class T>
void shuffle(std::vector<T>& items, std::mt19937_64& rng) {
  for (uint64_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng() % i]);
}

// Best-fit decreasing (Johnson 1973: within 11/9 of the fewest rows, and near full when samples
// are short against seq_len): the longest samples first, each into the row whose free room is
// the smallest that still holds it. Equal lengths go in the epoch's shuffled order, so rows are
// made of other samples each epoch.
std::vector<Row> pack_best_fit(const std::vector<uint32_t>& positions, const std::vector<uint64_t>& order,
                               uint32_t seq_len) {
  std::vector<uint64_t> longest_first = order;
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [&](uint64_t a, uint64_t b) { return positions[a] > positions[b]; });
  std::vector<Row> rows;
  std::multimap<uint32_t, size_t> room;  // free positions -> row, for rows with any
  for (const uint64_t sample : longest_first) {
    const uint32_t p = positions[sample];
    const auto fit = room.lower_bound(p);
    size_t row = rows.size();
    if (fit == room.end()) {
      rows.emplace_back();
    } else {
      row = fit->second;
      room.erase(fit);
    }
    rows[row].segments.push_back({sample, p});
    rows[row].used += p;
    if (rows[row].used < seq_len) room.emplace(seq_len - rows[row].used, row);
  }
  return rows;
}

}  // namespace

EpochRows pack_epoch(const std::vector<uint32_t>& positions, const std::vector<uint32_t>& trained_positions,
                     const PackOptions& o, uint64_t epoch) {
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + epoch + 1);
  std::vector<uint64_t> order(positions.size());
  for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
  shuffle(order, rng);
  std::vector<Row> all;
  if (o.packing) {
    all = pack_best_fit(positions, order, o.seq_len);
    shuffle(all, rng);  // rows in a per-epoch order, not longest first
  } else {
    for (const uint64_t sample : order) all.push_back({{{sample, positions[sample]}}, positions[sample]});
  }

  EpochRows out;
  out.all_rows = all.size();
  const uint64_t per_rank = all.size() / o.world_size;
  out.dropped_rows = all.size() - per_rank * o.world_size;
  uint64_t used = 0, trained = 0;
  for (uint64_t r = 0; r < per_rank * o.world_size; ++r) {
    for (const Segment& s : all[r].segments) trained += trained_positions[s.sample];
    used += all[r].used;
    if (r % o.world_size == o.rank) out.rows.push_back(std::move(all[r]));
  }
  const double capacity = double(per_rank * o.world_size) * o.seq_len;
  out.nonpad = capacity > 0 ? double(used) / capacity : 0;
  out.loss_tokens = capacity > 0 ? double(trained) / capacity : 0;
  return out;
}

}  // namespace loom::sft
