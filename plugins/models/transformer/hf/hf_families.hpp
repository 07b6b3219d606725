// hf_families.hpp: the Hugging Face families hf_causal_lm builds, one row each
// (hf_families.cpp): the class and model_type config.json names, which of Loom's models
// computes it, and what the family changes, each a named capability read by hf_config.cpp,
// hf_sliding_windows.cpp and hf_config_keys.cpp. A family whose math Loom's models already have
// is one row; one that needs new math is a folder beside llama/ first (README.md beside this
// folder has the recipe).
#pragma once

#include <cstdint>
#include <string>

namespace loom_gpt {

// Which model computes the family.
enum class HfModel { gpt2, llama };

// How config.json sets the attention projections' biases.
enum class HfBiases {
  attention_bias,  // attention_bias (default false) puts biases on q, k, v and o (Llama, Mistral, Qwen3)
  qkv_always,      // q, k and v always have biases, o never (Qwen2)
  qkv_key,         // qkv_bias (default true) on q, k and v, o never (Qwen2-MoE in transformers 5)
};

// A mixture of experts' layout (hf_config.cpp, moe_from), or none.
enum class HfExperts {
  none,
  qwen,           // num_experts of moe_intermediate_size, decoder_sparse_step, mlp_only_layers (Qwen3-MoE)
  qwen_shared,    // the same plus a shared expert and its gate (Qwen2-MoE)
  mixtral,        // every layer, num_local_experts of intermediate_size, top k renormalised
};

// Which layers slide and how wide (hf_sliding_windows.cpp has each rule in full).
enum class HfWindows { none, mistral, mixtral, qwen, qwen2_moe, qwen3_moe };

// transformers 5.24's defaults for the keys a config.json may leave out and Loom reads with a
// default (each *Config class's __init__). transformers5_test and the config sweep remove each
// key from folders transformers saved and compare.
struct HfDefaults {
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int64_t kv_heads = 0;  // 0: num_attention_heads (LlamaConfig)
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads
  int64_t max_positions = 2048;
  int64_t intermediate = 11008;  // the dense MLP's width (a mixture with no dense layer never uses it)
  int64_t top_k = 0;             // num_experts_per_tok of a mixture of experts
};

struct HfFamily {
  const char* architecture;  // config.json "architectures"[0]: "Qwen3ForCausalLM"
  const char* model_type;    // "qwen3"
  HfModel model;
  HfBiases biases = HfBiases::attention_bias;
  bool head_norm = false;  // RMSNorm over each head of q and k before the rotation (Qwen3)
  HfExperts experts = HfExperts::none;
  HfWindows windows = HfWindows::none;
  HfDefaults defaults;
};

// The row whose architecture (or, with by_model_type, model_type) is `name`; nullptr if none.
const HfFamily* find_hf_family(const std::string& name, bool by_model_type);

// "LlamaForCausalLM, MistralForCausalLM, ...": every class hf_causal_lm builds, for messages.
std::string hf_family_list();

}  // namespace loom_gpt
