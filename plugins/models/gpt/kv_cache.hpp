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

struct KvCache {
  std::vector<at::Tensor> keys, values;  // per layer: (B, K, S, D), after rotary where there is one
  int64_t length = 0;                    // S: positions held, the same in every layer

  // Appends a layer's new keys and values (B, K, T, D) and returns all of them, (B, K, S + T, D)
  // each. `length` moves on once every layer has appended (advance()).
  std::pair<at::Tensor, at::Tensor> append(size_t layer, const at::Tensor& k, const at::Tensor& v) {
    if (keys.size() <= layer) {
      keys.resize(layer + 1);
      values.resize(layer + 1);
    }
    keys[layer] = keys[layer].defined() ? at::cat({keys[layer], k}, 2) : k;
    values[layer] = values[layer].defined() ? at::cat({values[layer], v}, 2) : v;
    return {keys[layer], values[layer]};
  }
  void advance(int64_t positions) { length += positions; }
};

}  // namespace loom_gpt
