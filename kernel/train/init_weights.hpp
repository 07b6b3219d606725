// init_weights.hpp: `[model] init_from`: a new run's model starts from weights saved
// elsewhere, a Hugging Face folder or a Loom checkpoint, by parameter name. Weights only: the
// optimizer, schedule, RNG and data start fresh, so it is the start of a new stage, not a resume.
#pragma once

#include <set>
#include <string>

#include "abi/compute_components.hpp"
#include "formats/weight_loading.hpp"
#include "abi/registry.hpp"
#include "train/run_plan.hpp"

namespace loom {

// Does nothing when settings.init_from is empty. Throws a usage Failure (exit 2) naming the
// folder when it is neither kind of source or its weights do not fit (strict), listing the
// first missing, unexpected and mismatched tensors with their counts. With LoRA adapters
// ([lora]): a PEFT adapter folder fills the adapters alone (its r and lora_alpha must be
// [lora]'s); any other source fills the base, and the adapters only where it has them.
// held_elsewhere: under expert parallelism, the experts other ranks hold (their tensors in the
// source are theirs, not unexpected); null there refuses init_from. write: how each value goes
// into its parameter (formats::LoadRules::write; empty: copied whole).
void init_model_weights(ModelInstance& model, const ModelInitSettings& settings, const AdapterSettings& lora,
                        const Registry* registry, const std::set<std::string>* held_elsewhere = nullptr,
                        const formats::WriteValue& write = {});

}  // namespace loom
