// plugin.cpp: the `gpt` plugin's entry point; the models live in gpt.cpp, llama.cpp and hf_causal_lm.cpp.
#include <loom/plugin.hpp>
#include <loom/torch.hpp>  // the torch build fingerprint LOOM_PLUGIN records

#include "components.hpp"

LOOM_PLUGIN("gpt", "0.1.0", loom_gpt::gpt_component(), loom_gpt::llama_component(),
            loom_gpt::hf_causal_lm_component())
