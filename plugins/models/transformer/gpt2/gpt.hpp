// gpt.hpp: GPT-2 as one parameterised model, built from a GptSpec: the `gpt` component fills
// the spec from its options, `hf_causal_lm` from a GPT2LMHeadModel config.json.
#pragma once

#include <loom/model.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "layers/attention.hpp"
#include "layers/recompute.hpp"

namespace loom_gpt {

struct GptSpec {
  std::string component = "gpt";  // for messages
  int64_t vocab_size = 256, n_layer = 4, n_head = 4, n_embd = 128;
  int64_t seq_len = 256;      // the longest input
  int64_t n_positions = 256;  // rows of the position table (at least seq_len)
  int64_t n_inner = 512;      // MLP width F (GPT-2: 4 n_embd)
  double layer_norm_eps = 1e-5, dropout = 0.0, init_std = 0.02;
  bool bias = true;
  RecomputePolicy recompute;  // activation checkpointing of the blocks
  bool random_init = true;  // false: parameters are left uninitialised for weights loaded next
  uint64_t seed = 0;
};

// Throws loom::Error naming spec.component when the spec is not a model.
void check_gpt_spec(const GptSpec& spec);

std::unique_ptr<loom::Model> make_gpt(const GptSpec& spec, const loom::Context& ctx);

// The spec as a Hugging Face GPT2LMHeadModel config.json object (hf_config.cpp).
nlohmann::json gpt_hf_config(const GptSpec& spec);

}  // namespace loom_gpt
