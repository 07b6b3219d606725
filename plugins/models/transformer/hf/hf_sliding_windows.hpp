// hf_sliding_windows.hpp: which layers of a Hugging Face model attend through a sliding window,
// and how wide, as the transformers that wrote or reads the folder builds them. The rule differs
// by family and, for the mixtures of experts, by transformers version (issue 49): each family's
// rule is in the .cpp, and a folder whose rule Loom cannot tell is refused naming both.
#pragma once

#include <cstdint>
#include <vector>

#include "hf/hf_families.hpp"
#include "hf/hf_keys.hpp"

namespace loom_gpt {

// One window per layer (0: full attention), or none when no layer has a window.
std::vector<int64_t> sliding_windows(const Keys& keys, const HfFamily& family, int64_t n_layer);

}  // namespace loom_gpt
