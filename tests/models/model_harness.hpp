// model_harness.hpp: builds model components as the host does (the real plugin files, loaded
// through the kernel's registry and loader; options validated and defaults filled in), plus
// the small tensor helpers the model tests share.
#pragma once

#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <toml++/toml.h>

#include <map>
#include <memory>
#include <string>

#include "failure_message.hpp"
#include "abi/compute_components.hpp"
#include "config/options.hpp"
#include "abi/plugin_loader.hpp"
#include "plugin_slots.hpp"

namespace loom_test {

// base with every key of changes set to its value there.
inline toml::table merged(toml::table base, const toml::table& changes) {
  for (auto&& [key, node] : changes) node.visit([&, k = key](auto&& v) { base.insert_or_assign(k, v); });
  return base;
}

// A model component with the given options on the CPU; throws loom::Failure as the host would.
inline std::unique_ptr<loom::ModelInstance> make_model(const std::string& component, const toml::table& options,
                                                       uint64_t seed = 0) {
  const loom::SlotConfig slot = plugin_slot(LOOM_KIND_MODEL, "model", component, options);
  const loom::RunContext run{LOOM_TEST_TMP, "cpu", seed, 0, 1, 1};
  return std::make_unique<loom::ModelInstance>(slot, run);
}

// The model's parameters by name (the tensors the model itself computes with).
inline std::map<std::string, at::Tensor> params_by_name(loom::ModelInstance& model) {
  std::map<std::string, at::Tensor> out;
  for (const loom::ModelParam& p : model.params()) out[p.name] = *p.tensor;
  return out;
}

// Overwrites every parameter with random values, so that zero biases and unit norm weights
// cannot hide a mistake. Norm weights stay near 1.
inline void randomize(loom::ModelInstance& model, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const loom::ModelParam& p : model.params()) {
    const bool norm = p.name.find("ln_") != std::string::npos || p.name.find("norm") != std::string::npos;
    at::Tensor values = at::normal(0.0, 0.3, p.tensor->sizes(), gen);
    p.tensor->copy_(norm && p.name.find(".weight") != std::string::npos ? values + 1.0 : values);
  }
}

// Random token ids in [0, vocab) of shape (B, T).
inline at::Tensor tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {B, T}, gen, at::kLong);
}

// Targets for inputs: random ids with a few positions marked LOOM_IGNORE_INDEX.
inline at::Tensor targets_with_ignored(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  at::Tensor t = tokens(B, T, vocab, seed);
  t.index_put_({0, 0}, LOOM_IGNORE_INDEX);
  t.index_put_({B - 1, T - 1}, LOOM_IGNORE_INDEX);
  return t;
}

// Reference cross-entropy sum written out: logsumexp minus the target logit, over targets
// that are not LOOM_IGNORE_INDEX. logits: (B, T, V) double; targets: (B, T).
inline at::Tensor reference_loss_sum(const at::Tensor& logits, const at::Tensor& targets) {
  at::Tensor total = at::zeros({}, at::kDouble);
  for (int64_t b = 0; b < logits.size(0); ++b)
    for (int64_t t = 0; t < logits.size(1); ++t) {
      const int64_t y = targets[b][t].item<int64_t>();
      if (y == LOOM_IGNORE_INDEX) continue;
      const at::Tensor row = logits[b][t];  // (V)
      const at::Tensor m = row.max();
      total = total + (m + (row - m).exp().sum().log()) - row[y];
    }
  return total;
}

// Causal attention for one head, one position at a time: position t attends to 0..t.
// q, k, v: (B, T, D) double -> (B, T, D).
inline at::Tensor reference_head_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t T = q.size(1), D = q.size(2);
  std::vector<at::Tensor> rows;
  for (int64_t t = 0; t < T; ++t) {
    const at::Tensor qt = q.narrow(1, t, 1);                                               // (B, 1, D)
    const at::Tensor scores = at::bmm(qt, k.narrow(1, 0, t + 1).transpose(1, 2)) / std::sqrt(double(D));  // (B, 1, t+1)
    const at::Tensor w = (scores - scores.amax(-1, true)).exp();
    rows.push_back(at::bmm(w / w.sum(-1, true), v.narrow(1, 0, t + 1)));                  // (B, 1, D)
  }
  return at::cat(rows, 1);
}

// The model's loss sum as the host would get it (float), as a double.
inline double model_loss(loom::ModelInstance& model, const at::Tensor& inputs, const at::Tensor& targets) {
  at::NoGradGuard no_grad;
  return model.loss_sum(inputs, targets).item<double>();
}

}  // namespace loom_test
