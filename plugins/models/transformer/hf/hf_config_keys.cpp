#include "hf/hf_config_keys.hpp"

#include <algorithm>
#include <initializer_list>

namespace loom_gpt {
namespace {

using KeyList = std::initializer_list<const char*>;

// Read by hf_config.cpp for every architecture.
constexpr KeyList kReadByAll = {"architectures", "model_type", "vocab_size", "initializer_range",
                                "tie_word_embeddings"};
// Read for the Llama family (Llama, Mistral, Qwen2, Qwen3): sizes, norms, rotary settings in
// both transformers 4 and 5 spellings, biases, activations, sliding windows.
constexpr KeyList kReadByLlama = {
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters",
    "hidden_act", "mlp_bias", "attention_bias", "sliding_window", "use_sliding_window", "max_window_layers",
    "layer_types", "pad_token_id"};
// Read for the mixtures of experts besides the Llama family's (moe_from in hf_config.cpp).
constexpr KeyList kReadByMoe = {"num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
                                "shared_expert_intermediate_size", "norm_topk_prob", "decoder_sparse_step",
                                "mlp_only_layers", "output_router_logits", "router_aux_loss_coef",
                                "router_jitter_noise", "qkv_bias"};
// Read for GPT-2 (gpt_spec_from_hf).
// pad_token_id changes nothing in GPT-2, whose wte has no padding row (GPT2Model).
constexpr KeyList kReadByGpt2 = {"n_embd", "n_layer", "n_head", "n_inner", "n_positions",
                                 "layer_norm_epsilon", "activation_function", "scale_attn_weights",
                                 "scale_attn_by_inverse_layer_idx", "add_cross_attention", "pad_token_id"};
// Known not to change what the model computes from its weights:
//  - bookkeeping: versions, names, the stored dtype (safetensors headers give the real one);
//  - token ids and generation defaults (host generate reads generation_config.json); the
//    padding token is read by each family (padding_row in hf_config.cpp);
//  - training-time switches: dropout rates (hf_causal_lm's own dropout option decides),
//    gradient checkpointing, the key/value cache;
//  - pretraining_tp (Llama: the same products split in slices, equal up to rounding) and
//    reorder_and_upcast_attn (GPT-2: attention scores in fp32, which Loom's fp32 runs use);
//  - GPT-2's sequence-summary head (GPT2DoubleHeadsModel only), task tables, and n_ctx, which
//    transformers' GPT-2 has not read since 4.0 (n_positions sizes the position table).
constexpr KeyList kHarmless = {
    "transformers_version", "_name_or_path", "dtype", "torch_dtype", "use_bfloat16", "use_cache", "return_dict",
    "output_attentions", "output_hidden_states", "torchscript", "bos_token_id", "eos_token_id",
    "unk_token_id", "sep_token_id", "decoder_start_token_id", "max_length", "min_length", "do_sample",
    "early_stopping", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "num_return_sequences", "attention_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
    "gradient_checkpointing", "pretraining_tp", "reorder_and_upcast_attn", "summary_activation",
    "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj", "task_specific_params",
    "id2label", "label2id", "tokenizer_class", "is_encoder_decoder", "is_decoder", "chunk_size_feed_forward",
    "problem_type", "finetuning_task", "prefix", "n_ctx"};

bool listed(const KeyList& list, const std::string& key) {
  return std::any_of(list.begin(), list.end(), [&](const char* k) { return key == k; });
}

}  // namespace

std::vector<std::string> unknown_config_keys(const nlohmann::json& config, const HfFamily& family) {
  std::vector<std::string> out;
  const KeyList& model = family.model == HfModel::gpt2 ? kReadByGpt2 : kReadByLlama;
  const bool moe = family.experts != HfExperts::none;
  for (const auto& [key, value] : config.items()) {
    if (listed(kReadByAll, key) || listed(model, key) || listed(kHarmless, key)) continue;
    if (moe && listed(kReadByMoe, key)) continue;
    out.push_back(key);
  }
  return out;
}

}  // namespace loom_gpt
