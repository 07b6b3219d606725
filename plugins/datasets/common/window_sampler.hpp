// window_sampler.hpp: which windows of a token corpus each rank reads, batch by batch. Shared
// by the `token_file` and `text` datasets; header-only, torch-free, SDK-free.
//
// Symbols: N = tokens in the corpus, T = seq_len, B = batch_size, R = world size, r = rank.
//
//   - The corpus is cut into W = floor((N - 1) / T) windows of T + 1 tokens with stride T:
//     window w covers tokens [w*T, w*T + T], so inputs are its first T tokens and targets the
//     last T (the same tokens shifted by one). A tail shorter than a window is never read.
//   - Epoch e visits the windows in the order of a permutation of [0, W) drawn from (seed, e)
//     by Fisher-Yates over our own splitmix64 stream. std::shuffle and the std distributions
//     are not used: their output differs between standard libraries.
//   - Rank r takes permutation positions r, r + R, r + 2R, ...; every rank takes the same
//     count floor(W / R), so ranks stay in lockstep and no window goes to two ranks.
//   - Batch b of an epoch is the rank's positions [b*B, (b+1)*B). The epoch ends after
//     floor(floor(W / R) / B) batches; the next one reshuffles.
//
// So the windows of a batch are a pure function of (seed, epoch, rank, batch index), and the
// state needed for exact resume is just (epoch, batch index). The permutation costs 4 bytes
// per window (8 beyond 2^32 windows) and is rebuilt once per epoch.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data_error.hpp"
#include "little_endian.hpp"

namespace loom::data {

// splitmix64 (Steele, Lea, Flood 2014): a 64-bit counter through a bijective mixer. Every
// platform gives the same stream.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t next() { return mix(state_ += 0x9E3779B97F4A7C15ull); }
  // Uniform in [0, bound), bound >= 1, without modulo bias: draws below 2^64 mod bound are
  // rejected so every residue has the same number of preimages.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t state_;
};

// The order in which epoch `epoch` visits n windows: Fisher-Yates from the last slot down.
template <class Index>
void shuffled_indices(uint64_t seed, uint64_t epoch, uint64_t n, std::vector<Index>& out) {
  out.resize(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = Index(i);
  SplitMix64 rng(SplitMix64::mix(seed ^ 0x6C6F6F6D2D77696Eull /* "loom-win" */) + SplitMix64::mix(epoch));
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = rng.below(i);
    const Index t = out[i - 1];
    out[i - 1] = out[j];
    out[j] = t;
  }
}

struct WindowSamplerConfig {
  uint64_t seed = 0;         // run.seed
  uint64_t token_count = 0;  // N
  uint64_t seq_len = 0;      // T
  uint64_t batch_size = 0;   // B
  uint32_t rank = 0;         // r
  uint32_t world_size = 1;   // R
};

class WindowSampler {
 public:
  // `source` names the data in messages (a file or directory). Throws a bad_input DataError
  // when the corpus cannot fill one batch on every rank.
  WindowSampler(const WindowSamplerConfig& c, std::string source) : c_(c), source_(std::move(source)) {
    if (c_.seq_len == 0 || c_.batch_size == 0)
      throw bad_input(source_ + ": seq_len and batch_size must be positive");
    if (c_.world_size == 0 || c_.rank >= c_.world_size)
      throw bad_input(source_ + ": rank " + std::to_string(c_.rank) + " is outside world size " +
                      std::to_string(c_.world_size));
    if (c_.token_count < c_.seq_len + 1)
      throw bad_input(source_ + ": seq_len " + std::to_string(c_.seq_len) + " is longer than the data: a window needs " +
                      std::to_string(c_.seq_len + 1) + " tokens but there are only " + std::to_string(c_.token_count) +
                      "; lower seq_len or use more data");
    windows_ = (c_.token_count - 1) / c_.seq_len;
    per_rank_ = windows_ / c_.world_size;
    batches_per_epoch_ = per_rank_ / c_.batch_size;
    if (batches_per_epoch_ == 0)
      throw bad_input(source_ + ": too little data for one batch: " + std::to_string(windows_) + " windows of " +
                      std::to_string(c_.seq_len + 1) + " tokens give " + std::to_string(per_rank_) + " per rank on " +
                      std::to_string(c_.world_size) + " rank(s), fewer than batch_size " +
                      std::to_string(c_.batch_size) + "; lower batch_size or seq_len, or use more data");
  }

  uint64_t windows() const { return windows_; }
  uint64_t windows_per_rank() const { return per_rank_; }
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  uint64_t epoch() const { return epoch_; }
  uint64_t batch() const { return batch_; }  // index within the epoch of the NEXT batch

  // The first token of each of the next batch's B windows (window * T), then advances.
  void next(std::vector<uint64_t>& starts) {
    ensure_order();
    starts.resize(c_.batch_size);
    for (uint64_t i = 0; i < c_.batch_size; ++i) {
      const uint64_t position = (batch_ * c_.batch_size + i) * c_.world_size + c_.rank;
      starts[i] = window_at(position) * c_.seq_len;
    }
    if (++batch_ == batches_per_epoch_) {
      batch_ = 0;
      ++epoch_;  // the next call reshuffles
    }
  }

  static constexpr size_t kStateBytes = 72;  // the size of a save_state() record

  // State record (little-endian, 72 bytes):
  //   "LOOMWINS" | u32 version 1 | u32 0 | u64 seed | u64 token_count | u64 seq_len |
  //   u64 batch_size | u32 rank | u32 world_size | u64 epoch | u64 batch
  // The configuration fields let restore refuse a state that would not continue this run.
  std::string save_state() const {
    std::string s(kStateMagic, sizeof kStateMagic);
    append_le<uint32_t>(s, kStateVersion);
    append_le<uint32_t>(s, 0);
    append_le<uint64_t>(s, c_.seed);
    append_le<uint64_t>(s, c_.token_count);
    append_le<uint64_t>(s, c_.seq_len);
    append_le<uint64_t>(s, c_.batch_size);
    append_le<uint32_t>(s, c_.rank);
    append_le<uint32_t>(s, c_.world_size);
    append_le<uint64_t>(s, epoch_);
    append_le<uint64_t>(s, batch_);
    return s;
  }

  // Restores a save_state() record; afterwards next() yields exactly the batches that would
  // have followed the save. Throws a bad_input DataError (state unchanged) when the record is
  // malformed or was written under a different configuration.
  void load_state(const std::string& s) {
    const std::string fresh = "; resume with the configuration that wrote the checkpoint, or start a fresh run";
    if (s.size() != kStateBytes || std::memcmp(s.data(), kStateMagic, sizeof kStateMagic) != 0)
      throw bad_input(source_ + ": the saved dataset state is not a window-sampler record (" + std::to_string(s.size()) +
                      " bytes, expected " + std::to_string(kStateBytes) + " starting with \"LOOMWINS\")" + fresh);
    const char* p = s.data() + sizeof kStateMagic;
    const uint32_t version = load_le<uint32_t>(p);
    if (version != kStateVersion)
      throw bad_input(source_ + ": the saved dataset state has version " + std::to_string(version) +
                      ", this build reads version " + std::to_string(kStateVersion) + fresh);
    WindowSamplerConfig saved;
    saved.seed = load_le<uint64_t>(p + 8);
    saved.token_count = load_le<uint64_t>(p + 16);
    saved.seq_len = load_le<uint64_t>(p + 24);
    saved.batch_size = load_le<uint64_t>(p + 32);
    saved.rank = load_le<uint32_t>(p + 40);
    saved.world_size = load_le<uint32_t>(p + 44);
    const uint64_t epoch = load_le<uint64_t>(p + 48), batch = load_le<uint64_t>(p + 56);
    const auto differs = [&](const char* what, uint64_t then, uint64_t now, const char* fix) {
      if (then != now)
        throw bad_input(source_ + ": the saved dataset state was written with " + what + " " + std::to_string(then) +
                        " but this run has " + std::to_string(now) + "; " + fix + fresh);
    };
    differs("world size", saved.world_size, c_.world_size, "resume on the same number of ranks");
    differs("rank", saved.rank, c_.rank, "each rank must load its own state");
    differs("token count", saved.token_count, c_.token_count,
            "the data changed since the checkpoint; restore the original data");
    differs("seq_len", saved.seq_len, c_.seq_len, "set the same [data] seq_len");
    differs("batch_size", saved.batch_size, c_.batch_size, "set the same [data] batch_size");
    differs("seed", saved.seed, c_.seed, "set the same run.seed");
    if (batch >= batches_per_epoch_)
      throw bad_input(source_ + ": the saved dataset state points at batch " + std::to_string(batch) +
                      " of an epoch that has only " + std::to_string(batches_per_epoch_) + fresh);
    epoch_ = epoch;
    batch_ = batch;
  }

 private:
  static constexpr char kStateMagic[8] = {'L', 'O', 'O', 'M', 'W', 'I', 'N', 'S'};
  static constexpr uint32_t kStateVersion = 1;

  void ensure_order() {
    if (order_epoch_ == epoch_ && order_ready_) return;
    if (windows_ <= UINT32_MAX) {
      shuffled_indices(c_.seed, epoch_, windows_, order32_);
    } else {
      shuffled_indices(c_.seed, epoch_, windows_, order64_);
    }
    order_epoch_ = epoch_;
    order_ready_ = true;
  }
  uint64_t window_at(uint64_t position) const {
    return windows_ <= UINT32_MAX ? order32_[position] : order64_[position];
  }

  WindowSamplerConfig c_;
  std::string source_;
  uint64_t windows_ = 0, per_rank_ = 0, batches_per_epoch_ = 0;
  uint64_t epoch_ = 0, batch_ = 0;  // position of the next batch
  // The current epoch's permutation; 32-bit entries while they fit, to halve its memory.
  std::vector<uint32_t> order32_;
  std::vector<uint64_t> order64_;
  uint64_t order_epoch_ = 0;
  bool order_ready_ = false;
};

}  // namespace loom::data
