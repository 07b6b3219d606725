// generation.hpp: next-token decoding with a model's logits: greedy (temperature 0) or sampled
// with temperature, top-k and top-p from a seeded generator, so the same seed gives the same
// text. A model with a key/value cache (ABI 1.4 decode) computes only the new token each step;
// one without recomputes the sequence so far (at most its context, the newest tokens kept).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "abi/compute_components.hpp"

namespace loom {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: every token
  double top_p = 1.0;        // 1: every token
  uint64_t seed = 0;
  int64_t max_new_tokens = 128;
  int64_t context = 2048;    // the model's longest input
  bool use_cache = true;     // false: recompute the sequence each step even where the model has a cache
};

// Appends up to max_new_tokens ids after `prompt`, calling on_token for each as it comes and
// stopping after one in `stop`. Returns the new ids.
std::vector<int64_t> generate_tokens(ModelInstance& model, const std::vector<int64_t>& prompt, const SamplingOptions& options,
                                     const std::set<int64_t>& stop, const std::function<void(int64_t)>& on_token);

// The options as the command line gives them; throws a usage Failure naming the bad one.
void check_sampling(const SamplingOptions& options);

}  // namespace loom
