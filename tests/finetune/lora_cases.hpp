// lora_cases.hpp: what the LoRA tests share: a case (architecture, targeted modules, rank,
// alpha), the [lora] settings it makes, and hf_causal_lm on a base folder with adapters read
// from a PEFT adapter folder through [model] init_from.
#pragma once

#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model_harness.hpp"
#include "plugin_slots.hpp"
#include "train/init_weights.hpp"

namespace loom_test {

struct Case {
  const char* arch;
  std::vector<std::string> targets;
  int64_t rank;
  double alpha;
};

inline loom::AdapterSettings adapters_of(const Case& c) {
  loom::AdapterSettings out;
  out.enabled = true;
  out.targets = c.targets;
  out.rank = c.rank;
  out.alpha = c.alpha;
  return out;
}

inline std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// hf_causal_lm reading `base`, with [lora] adapters, the adapters then read from `adapter` (init_from).
inline std::unique_ptr<loom::ModelInstance> adapted_model(const std::filesystem::path& base,
                                                          const std::filesystem::path& adapter, const Case& c) {
  const loom::SlotConfig slot =
      plugin_slot(LOOM_KIND_MODEL, "model", "hf_causal_lm", toml::table{{"from", base.string()}, {"seq_len", 16}});
  loom::RunContext run{LOOM_TEST_TMP, "cpu", 0, 0, 1, 1};
  run.adapters = adapters_of(c);
  auto model = std::make_unique<loom::ModelInstance>(slot, run);
  loom::ModelInitSettings init;
  init.init_from = adapter.string();
  loom::init_model_weights(*model, init, run.adapters, nullptr);
  return model;
}

inline at::Tensor logits_of(loom::ModelInstance& model, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  model.set_training(false);
  return model.logits(ids);
}

}  // namespace loom_test
