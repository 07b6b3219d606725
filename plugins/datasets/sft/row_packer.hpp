// row_packer.hpp: samples into rows of seq_len positions, one epoch at a time.
//
// A sample of n tokens fills n - 1 positions (inputs are its tokens but the last, labels its
// tokens but the first). Packing (the default) puts the samples into rows best-fit decreasing,
// equal lengths in an order shuffled with (seed, epoch), then shuffles the rows; padding gives
// every shuffled sample a row of its own. Rows are dealt to ranks
// round-robin, each rank taking the same number (the few left over are dropped and counted), so
// ranks never share a sample. Everything is a pure function of (samples, seed, epoch, rank,
// world), which is what makes resume exact: the state is just (epoch, batch).
#pragma once

#include <cstdint>
#include <vector>

namespace loom::sft {

struct Segment {
  uint64_t sample;
  uint32_t positions;  // the sample's length - 1
};

struct Row {
  std::vector<Segment> segments;
  uint32_t used = 0;
};

struct EpochRows {
  std::vector<Row> rows;          // this rank's rows, in order
  uint64_t all_rows = 0, dropped_rows = 0;
  double nonpad = 0, loss_tokens = 0;  // over every rank's rows: fraction of positions
};

struct PackOptions {
  uint32_t seq_len = 0;
  bool packing = true;
  uint64_t seed = 0;
  uint32_t rank = 0, world_size = 1;
};

// positions[i]: sample i's positions; trained_positions[i]: how many of them carry a label.
EpochRows pack_epoch(const std::vector<uint32_t>& positions, const std::vector<uint32_t>& trained_positions,
                     const PackOptions& options, uint64_t epoch);

}  // namespace loom::sft
