// components.hpp: the components of the `gpt` plugin. Each is defined (in an anonymous
// namespace) in its own file; plugin.cpp registers them.
#pragma once

#include <loom/abi.h>

namespace loom_gpt {
const loom_component* gpt_component();    // gpt.cpp: GPT-2
const loom_component* llama_component();         // llama.cpp: Llama
const loom_component* hf_causal_lm_component();  // hf_causal_lm.cpp: a Hugging Face folder
}  // namespace loom_gpt
