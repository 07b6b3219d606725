// kv_cache.hpp: the keys and values a `gpt` or `llama` model keeps between decode() calls
// (ABI 1.4), so that generating one more token computes one position instead of the whole
// sequence. Header-only, in the plugin-local namespace loom_gpt.
//
// Shapes: B = batch, K = key/value heads, S = cached positions, T = new positions, D = head dim.
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace loom_gpt {

// Each layer's keys and values live in one buffer of `capacity` positions, allocated at its
// first append and written in place after that: a new token copies one position, not the whole
// cache (at::cat per token would copy all S positions of every layer, O(S^2) over a sequence).
struct KvCache {
  int64_t capacity = 0;                  // positions the buffers hold: the model's seq_len
  std::vector<at::Tensor> keys, values;  // per layer: (B, K, capacity, D), after rotary where there is one
  int64_t length = 0;                    // S: positions held, the same in every layer

  KvCache() = default;
  explicit KvCache(int64_t positions) : capacity(positions) {}

  // Writes a layer's new keys and values (B, K, T, D) at positions length .. length + T - 1 and
  // returns all of them, (B, K, length + T, D) each. `length` moves on once every layer has
  // written (advance()); the caller keeps length + T within capacity.
  std::pair<at::Tensor, at::Tensor> append(size_t layer, const at::Tensor& k, const at::Tensor& v) {
    if (keys.size() <= layer) {
      keys.resize(layer + 1);
      values.resize(layer + 1);
    }
    if (!keys[layer].defined()) {
      keys[layer] = at::empty({k.size(0), k.size(1), capacity, k.size(3)}, k.options());
      values[layer] = at::empty({v.size(0), v.size(1), capacity, v.size(3)}, v.options());
    }
    const int64_t T = k.size(2);
    keys[layer].narrow(2, length, T).copy_(k);
    values[layer].narrow(2, length, T).copy_(v);
    return {keys[layer].narrow(2, 0, length + T), values[layer].narrow(2, 0, length + T)};
  }
  void advance(int64_t positions) { length += positions; }
};

}  // namespace loom_gpt
