// hf_config.hpp: Hugging Face config.json <-> the model specs. Reading is strict: an
// architecture, a key or a value that would change the math in a way the models here do not
// implement is a loom::Error naming the file, the key and the fix, never silently ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "gpt2/gpt.hpp"
#include "hf/hf_families.hpp"
#include "llama/llama.hpp"

namespace loom_gpt {

struct HfModelConfig {
  const HfFamily* family = nullptr;  // by config.json's "architectures"[0], else its model_type
  nlohmann::json config;          // config.json as read
  int64_t max_positions = 0;      // max_position_embeddings (n_positions for GPT-2)
};

// Reads and checks dir/config.json (untrusted: size-capped, regular file only).
HfModelConfig read_hf_config(const std::string& dir);

// The Llama-family spec for a Llama, Mistral, Qwen2 or Qwen3 config, or a mixture of experts
// (Qwen2-MoE, Qwen3-MoE, Mixtral: spec.moe). seq_len: the longest
// input the run trains on (at most max_positions).
LlamaSpec llama_spec_from_hf(const HfModelConfig& hf, const std::string& path, int64_t seq_len);

// The GPT-2 spec for a GPT2LMHeadModel config.
GptSpec gpt_spec_from_hf(const HfModelConfig& hf, const std::string& path, int64_t seq_len);

}  // namespace loom_gpt
