// hf_config_keys.hpp: the rule against silent mis-loads. Every key of a config.json is read by
// hf_config.cpp, or is on a written list of keys known not to change the computation (token
// ids for generation, bookkeeping, training-only switches), or the import is refused naming it
// (hf_causal_lm's strict = false loads anyway and warns about each). tests/hf_models/
// config_sweep_test.cpp holds the lists to transformers itself: every field of each family's
// config class, set and left out, gives transformers' logits or a refusal naming it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "hf/hf_families.hpp"

namespace loom_gpt {

// The keys of config (in file order) that are neither read for the family nor known to be harmless.
std::vector<std::string> unknown_config_keys(const nlohmann::json& config, const HfFamily& family);

}  // namespace loom_gpt
