// llama.hpp: the Llama family as one parameterised model, built from a LlamaSpec: the
// `llama` component fills the spec from its options, `hf_causal_lm` from a Hugging Face
// config.json (Llama, Mistral, Qwen2, Qwen3 differ only in the switches below).
#pragma once

#include <loom/model.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "attention.hpp"
#include "moe.hpp"
#include "recompute.hpp"

namespace loom_gpt {

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
  bool qkv_bias = false;  // biases on q, k and v projections (Qwen2; attention_bias)
  bool o_bias = false;    // a bias on o_proj (attention_bias in Llama, Mistral, Qwen3)
  bool qk_norm = false;   // RMSNorm over each head of q and k before the rotation (Qwen3)
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
