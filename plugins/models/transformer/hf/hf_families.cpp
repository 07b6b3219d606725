#include "hf/hf_families.hpp"

namespace loom_gpt {
namespace {

// One row a family. Defaults: transformers 5.24's *Config classes (MixtralConfig's
// rms_norm_eps and rope theta differ; key/value heads, head size and context length vary).
const HfFamily kFamilies[] = {
    {"LlamaForCausalLM", "llama", HfModel::llama, HfBiases::attention_bias, false, HfExperts::none, HfWindows::none,
     {}},
    {"MistralForCausalLM", "mistral", HfModel::llama, HfBiases::attention_bias, false, HfExperts::none,
     HfWindows::mistral, {1e-6, 10000.0, 8, 0, 131072, 14336}},
    {"Qwen2ForCausalLM", "qwen2", HfModel::llama, HfBiases::qkv_always, false, HfExperts::none, HfWindows::qwen,
     {1e-6, 10000.0, 32, 0, 32768, 22016}},
    {"Qwen3ForCausalLM", "qwen3", HfModel::llama, HfBiases::attention_bias, true, HfExperts::none, HfWindows::qwen,
     {1e-6, 10000.0, 32, 128, 32768, 22016}},
    {"GPT2LMHeadModel", "gpt2", HfModel::gpt2, HfBiases::attention_bias, false, HfExperts::none, HfWindows::none,
     {}},  // GPT-2 reads none of the defaults (gpt_spec_from_hf)
    {"Qwen2MoeForCausalLM", "qwen2_moe", HfModel::llama, HfBiases::qkv_key, false, HfExperts::qwen_shared,
     HfWindows::qwen2_moe, {1e-6, 10000.0, 16, 0, 32768, 5632, 4}},
    {"Qwen3MoeForCausalLM", "qwen3_moe", HfModel::llama, HfBiases::attention_bias, true, HfExperts::qwen,
     HfWindows::qwen3_moe, {1e-6, 10000.0, 4, 0, 32768, 6144, 8}},
    {"MixtralForCausalLM", "mixtral", HfModel::llama, HfBiases::attention_bias, false, HfExperts::mixtral,
     HfWindows::mixtral, {1e-5, 1e6, 8, 0, 131072, 14336, 2}},
};

}  // namespace

const HfFamily* find_hf_family(const std::string& name, bool by_model_type) {
  for (const HfFamily& f : kFamilies)
    if (name == (by_model_type ? f.model_type : f.architecture)) return &f;
  return nullptr;
}

std::string hf_family_list() {
  std::string out;
  for (const HfFamily& f : kFamilies) out += std::string(out.empty() ? "" : ", ") + f.architecture;
  return out;
}

}  // namespace loom_gpt
