// llama.hpp: the Llama family as one parameterised model, built from a LlamaSpec: the
// `llama` component fills the spec from its options, `hf_causal_lm` from a Hugging Face
// config.json (hf/hf_families.cpp: Llama, Mistral, Qwen2, Qwen3 and their mixtures of experts
// differ only in the named choices below). A family that needs other math (Gemma's norm,
// DeepSeek's latent attention) adds a value to one of these choices and its code in llama.cpp,
// or a folder of its own beside this one; never a flag beside the others.
#pragma once

#include <loom/model.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "layers/attention.hpp"
#include "layers/moe.hpp"
#include "layers/recompute.hpp"

namespace loom_gpt {

// Which attention projections carry a bias.
enum class ProjectionBias {
  none,
  qkv,             // q, k and v (Qwen2)
  qkv_and_output,  // q, k, v and o (attention_bias in Llama, Mistral, Qwen3)
};

// A norm over each head of q and k before the rotation.
enum class HeadNorm {
  none,
  rms,  // RMSNorm over D (Qwen3)
};

struct LlamaSpec {
  std::string component = "llama";  // for messages
  int64_t vocab_size = 256, n_layer = 4, n_head = 4, n_kv_head = 4, n_embd = 128;
  int64_t head_dim = 32;      // D; Qwen3 sets it apart from n_embd / n_head
  int64_t seq_len = 256;      // the longest input (rotary table and mask)
  int64_t ffn_hidden = 352;   // F
  double rope_theta = 10000.0, rms_norm_eps = 1e-5, dropout = 0.0, init_std = 0.02;
  RopeScaling rope_scaling;
  bool tie_embeddings = false;
  // The embedding row of the padding token, which gets no gradient from the lookup (Hugging
  // Face's nn.Embedding(padding_idx = pad_token_id)); -1: none.
  int64_t padding_idx = -1;
  ProjectionBias bias = ProjectionBias::none;
  HeadNorm head_norm = HeadNorm::none;
  // Per layer, the keys a query sees in a sliding window, itself included (Mistral, Qwen2 and
  // Qwen3 with use_sliding_window); 0: all before it. Empty: no layer has a window.
  std::vector<int64_t> sliding_windows;
  MoeSpec moe;                // a mixture of experts' sparse layers (hf_causal_lm only); none by default
  RecomputePolicy recompute;  // activation checkpointing of the layers
  bool random_init = true;  // false: parameters are left uninitialised for weights loaded next
  uint64_t seed = 0;
};

// Throws loom::Error naming spec.component and the option when the spec is not a model.
void check_llama_spec(const LlamaSpec& spec);

// The model, with Hugging Face Llama parameter names; logits() and loss_sum() as usual.
std::unique_ptr<loom::Model> make_llama(const LlamaSpec& spec, const loom::Context& ctx);

// The spec as a Hugging Face LlamaForCausalLM config.json object (hf_config.cpp).
nlohmann::json llama_hf_config(const LlamaSpec& spec);

}  // namespace loom_gpt
