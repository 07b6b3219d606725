// peft_adapter.hpp: a LoRA adapter folder as Hugging Face PEFT writes and reads it
// (`PeftModel.from_pretrained`): adapter_config.json and adapter_model.safetensors, whose
// tensors are named "base_model.model.<module>.lora_A.weight" (r, in) and
// "...lora_B.weight" (out, r), without the adapter's name. The folder is untrusted: the config
// is checked field by field and the weights file is validated whole when opened.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "safetensors.hpp"

namespace loom::formats {

constexpr const char* kPeftConfig = "adapter_config.json";
constexpr const char* kPeftWeights = "adapter_model.safetensors";
constexpr const char* kPeftKeyPrefix = "base_model.model.";  // PeftModel wraps the model twice

struct PeftLoraConfig {
  int64_t r = 0;
  double lora_alpha = 0;
  double lora_dropout = 0;
  std::vector<std::string> target_modules;
  bool fan_in_fan_out = false;
  bool use_rslora = false;  // scale alpha / sqrt(r) instead of alpha / r
  std::string base_model;   // base_model_name_or_path; may be empty
};

// True when dir holds adapter_config.json (a PEFT adapter, whatever its kind).
bool is_peft_folder(const std::string& dir);

// Reads and checks dir's adapter_config.json: a FormatError naming the file and the field when
// it is not a LoRA adapter Loom can load (peft_type other than LORA, DoRA, per-layer rank or
// alpha patterns, a bias other than "none", r or alpha out of range).
PeftLoraConfig read_peft_lora_config(const std::string& dir);

// adapter_model.safetensors' tensors under the model's parameter names (kPeftKeyPrefix
// removed): a FormatError for a key without that prefix. The entries belong to `file`.
std::map<std::string, const TensorEntry*> peft_tensors(const SafetensorsFile& file);

// adapter_config.json for an adapter Loom trained: every field PEFT's LoraConfig writes, with
// PEFT's defaults for what Loom does not use.
nlohmann::json peft_lora_config_json(const PeftLoraConfig& config);

}  // namespace loom::formats
