// window_epochs.hpp: the batch loop of the datasets that cut fixed windows out of one token
// stream (text, token_file): the sampler's next window starts (window_sampler.hpp), the epoch end
// reported once after an epoch's last batch (epoch_ends.hpp), and the saved state of both. Each
// dataset keeps only what differs: where its tokens come from.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plugins/datasets/common/epoch_ends.hpp"
#include "plugins/datasets/common/window_sampler.hpp"

namespace loom::data {

class WindowEpochs {
 public:
  WindowEpochs(bool report_epochs, WindowSampler sampler) : epochs_(report_epochs), sampler_(std::move(sampler)) {}

  // The next batch's window starts into `starts`; false when the epoch's end is due instead
  // (the dataset returns Dataset::epoch_end() then).
  bool next(std::vector<uint64_t>& starts) {
    if (epochs_.take()) return false;
    sampler_.next(starts);
    epochs_.after_batch(sampler_);
    return true;
  }

  std::string save_state() const { return epochs_.save(sampler_.save_state()); }
  void load_state(const std::string& state) { sampler_.load_state(epochs_.load(state)); }
  // Batches per epoch when epochs are reported, else 0 (Dataset::batches_per_epoch's "endless").
  int64_t batches_per_epoch() const {
    return epochs_.reported() ? static_cast<int64_t>(sampler_.batches_per_epoch()) : 0;
  }

  // "W windows of T+1, N batches of B per epoch on each of R rank(s)", for the create log line.
  std::string summary(int64_t B, int64_t T, int world_size) const {
    return std::to_string(sampler_.windows()) + " windows of " + std::to_string(T + 1) + ", " +
           std::to_string(sampler_.batches_per_epoch()) + " batches of " + std::to_string(B) +
           " per epoch on each of " + std::to_string(world_size) + " rank(s)";
  }

 private:
  EpochEnds epochs_;
  WindowSampler sampler_;
};

}  // namespace loom::data
