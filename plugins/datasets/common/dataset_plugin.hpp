// dataset_plugin.hpp: what the window-sampling dataset plugins (token_file, text) share on the
// SDK side: turning sampled windows into a loom batch, and DataError into loom::Error.
// Torch-free; uses the SDK's DLPack helper.
#pragma once

#include <loom/dataset.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data_error.hpp"
#include "window_sampler.hpp"

namespace loom::data {

// read_window(start, out) writes the T + 1 token ids starting at token `start` into out.
// Returns inputs = the first T ids and targets = the last T of each window, int64 (B, T).
template <class ReadWindow>
loom::Dataset::Batch window_batch(const std::vector<uint64_t>& starts, int64_t seq_len, ReadWindow&& read_window) {
  const int64_t B = static_cast<int64_t>(starts.size()), T = seq_len;
  std::vector<int64_t> inputs(static_cast<size_t>(B * T)), targets(static_cast<size_t>(B * T));
  std::vector<int64_t> window(static_cast<size_t>(T + 1));
  for (int64_t b = 0; b < B; ++b) {
    read_window(starts[static_cast<size_t>(b)], window.data());
    int64_t* in = inputs.data() + b * T;
    int64_t* tg = targets.data() + b * T;
    for (int64_t t = 0; t < T; ++t) {
      in[t] = window[static_cast<size_t>(t)];
      tg[t] = window[static_cast<size_t>(t + 1)];
    }
  }
  DLManagedTensor* in = loom::dlpack_int64(std::move(inputs), {B, T});
  try {
    return {in, loom::dlpack_int64(std::move(targets), {B, T})};
  } catch (...) {
    in->deleter(in);
    throw;
  }
}

// The sampler configuration of a dataset `who` from its batch_size B and seq_len T and the
// run context. Throws a bad_input DataError when B or T is out of range.
inline WindowSamplerConfig sampler_config(const std::string& who, int64_t B, int64_t T, uint64_t token_count,
                                          const loom::Context& ctx) {
  if (B <= 0) throw bad_input(who + ": batch_size must be positive, got " + std::to_string(B));
  if (T <= 0) throw bad_input(who + ": seq_len must be positive, got " + std::to_string(T));
  if (B > (int64_t(1) << 31) / (T + 1)) throw bad_input(who + ": batch_size * seq_len is too large; lower one of them");
  if (ctx.rank < 0 || ctx.rank >= ctx.world_size)
    throw bad_input(who + ": rank " + std::to_string(ctx.rank) + " is outside world size " +
                    std::to_string(ctx.world_size));
  WindowSamplerConfig w;
  w.seed = ctx.seed;
  w.token_count = token_count;
  w.seq_len = uint64_t(T);
  w.batch_size = uint64_t(B);
  w.rank = uint32_t(ctx.rank);
  w.world_size = uint32_t(ctx.world_size);
  return w;
}

// Runs fn, turning a DataError into the loom::Error the host maps to an exit code: bad input
// becomes INVALID_ARGUMENT (exit 2 at create), an I/O failure INTERNAL (exit 1).
template <class Fn>
auto with_loom_errors(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const DataError& e) {
    throw loom::Error(e.what(), e.kind() == DataError::Kind::bad_input ? LOOM_STATUS_CODE_INVALID_ARGUMENT
                                                                       : LOOM_STATUS_CODE_INTERNAL);
  }
}

}  // namespace loom::data
