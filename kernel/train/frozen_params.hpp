// frozen_params.hpp: which of the model's parameters do not train ([model] freeze; with [lora],
// everything but the adapters), and the checksum a checkpoint keeps in their place. A frozen
// parameter stays the model's own tensor: it never enters the flat buffers, so it has no
// gradient, no optimizer state and no all-reduce traffic.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "abi/compute_components.hpp"
#include "train/run_plan.hpp"

namespace loom {

// The matching rule of [model] freeze: a pattern with '*' matches whole names ('*' stands for
// any run of characters, dots included); one without matches every name that contains it.
bool freeze_pattern_matches(const std::string& pattern, const std::string& name);

struct FrozenSummary {
  int64_t trained = 0, frozen = 0;                      // parameter elements
  size_t frozen_tensors = 0;
  size_t adapter_tensors = 0;                           // LoRA's A and B matrices ([lora])
  std::vector<std::pair<std::string, size_t>> matches;  // per freeze pattern: tensors it matched
  std::vector<std::string> match_lists;                 // per freeze pattern: the first names it matched
  std::string checksum;                                 // frozen_checksum(); "" when nothing is frozen
  // "123,456 parameters train, 7,890 frozen (freeze \"embed\": 1 tensor; LoRA: 8 adapter tensors)"
  std::string describe() const;
};

// Marks the frozen parameters on the model, turns their gradients off and, with frozen_dtype =
// "bf16", stores them in bf16. Throws a usage Failure (exit 2) for a pattern that matches
// nothing, a [lora] target that matches no adapted layer, bf16 without bf16 autocast, or a
// model left with nothing to train. Does nothing without freeze patterns or [lora].
FrozenSummary freeze_parameters(ModelInstance& model, const RunPlan& plan);

// 64-bit FNV-1a over 8-byte words of every frozen parameter's name, dtype, shape and values,
// in registration order, as 16 hex digits: what a checkpoint records instead of the weights.
std::string frozen_checksum(ModelInstance& model);

// [model] init_from, then freeze_parameters: the model as the run's first step sees it.
FrozenSummary prepare_model(ModelInstance& model, const RunPlan& plan);

}  // namespace loom
