// epoch_ends.hpp: finite data (ABI 1.2) for the window-sampler datasets. With report_epochs =
// true, the call after an epoch's last batch returns Dataset::epoch_end() instead of a batch,
// and the host fires epoch_end and epoch_begin. Whether that end is still to be reported is
// part of the saved state, so a run resumed exactly at the boundary neither repeats it nor
// drops it.
#pragma once

#include <string>

#include "window_sampler.hpp"

namespace loom::data {

inline constexpr const char* kReportEpochsDoc =
    "Tell the host where each epoch ends (finite data): epoch_end and epoch_begin fire, state.epoch counts "
    "epochs, [checkpoint] every_epoch saves; false: one endless stream that reshuffles each epoch silently.";

class EpochEnds {
 public:
  explicit EpochEnds(bool enabled) : enabled_(enabled) {}

  bool reported() const { return enabled_; }

  // True, once, when the previous batch was the last of its epoch.
  bool take() {
    const bool due = due_;
    due_ = false;
    return due;
  }
  // After drawing a batch: the sampler's next batch index is back at 0 when it was the last.
  void after_batch(const WindowSampler& sampler) { due_ = enabled_ && sampler.batch() == 0; }

  // The sampler's record, plus one byte (1: an end is due) when epochs are reported.
  std::string save(std::string sampler_record) const {
    if (enabled_) sampler_record.push_back(due_ ? '\1' : '\0');
    return sampler_record;
  }
  // The sampler's record inside a saved state; a state saved without epochs has no extra byte.
  std::string load(const std::string& state) {
    due_ = false;
    if (!enabled_ || state.size() != WindowSampler::kStateBytes + 1) return state;
    due_ = state.back() == '\1';
    return state.substr(0, WindowSampler::kStateBytes);
  }

 private:
  bool enabled_;
  bool due_ = false;
};

}  // namespace loom::data
