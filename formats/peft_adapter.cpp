#include "peft_adapter.hpp"

#include <cmath>

#include "files.hpp"
#include "format_error.hpp"
#include "hf_folder.hpp"
#include "peft_fields.hpp"

namespace loom::formats {

bool is_peft_folder(const std::string& dir) { return is_regular_file(join(dir, kPeftConfig)); }

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { invalid("'" + path + "': " + what); }

PeftLoraConfig lora_config_of(const nlohmann::json& c, const std::string& path) {
  if (c.value("peft_type", std::string()) != "LORA")
    fail(path, "peft_type is " + (c.contains("peft_type") ? c["peft_type"].dump() : std::string("missing")) +
                   "; Loom loads LoRA adapters (\"LORA\") only");
  check_peft_lora_fields(c, path);  // every other field: read below, harmless, or refused by name
  PeftLoraConfig out;
  if (!c.contains("r") || !c["r"].is_number_integer() || c["r"].get<int64_t>() < 1 || c["r"].get<int64_t>() > 65536)
    fail(path, "r must be an integer in [1, 65536]");
  out.r = c["r"].get<int64_t>();
  if (!c.contains("lora_alpha") || !c["lora_alpha"].is_number() || !std::isfinite(c["lora_alpha"].get<double>()) ||
      c["lora_alpha"].get<double>() <= 0)
    fail(path, "lora_alpha must be a positive number");
  out.lora_alpha = c["lora_alpha"].get<double>();
  if (c.contains("lora_dropout") && c["lora_dropout"].is_number()) out.lora_dropout = c["lora_dropout"].get<double>();
  const nlohmann::json targets = c.contains("target_modules") ? c["target_modules"] : nlohmann::json();
  if (!targets.is_array()) fail(path, "target_modules must be a list of module names (Loom does not read the regex form)");
  for (const auto& t : targets) {
    if (!t.is_string()) fail(path, "target_modules must hold strings");
    out.target_modules.push_back(t.get<std::string>());
  }
  out.fan_in_fan_out = c.value("fan_in_fan_out", false);
  if (c.contains("base_model_name_or_path") && c["base_model_name_or_path"].is_string())
    out.base_model = c["base_model_name_or_path"].get<std::string>();
  if (c.contains("bias") && c["bias"] != "none") fail(path, "bias is " + c["bias"].dump() + "; Loom loads bias = \"none\" only");
  return out;
}

}  // namespace

PeftLoraConfig read_peft_lora_config(const std::string& dir) {
  const std::string path = join(dir, kPeftConfig);
  const nlohmann::json c = read_json_object(path);
  try {
    return lora_config_of(c, path);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong JSON type
    fail(path, std::string("a field has the wrong type (") + e.what() + ")");
  }
}

std::map<std::string, const TensorEntry*> peft_tensors(const SafetensorsFile& file) {
  const std::string prefix = kPeftKeyPrefix;
  std::map<std::string, const TensorEntry*> out;
  for (const TensorEntry& entry : file.tensors()) {
    if (entry.name.size() <= prefix.size() || entry.name.compare(0, prefix.size(), prefix) != 0)
      invalid("'" + file.path() + "': tensor '" + entry.name + "' does not start with '" + prefix +
              "', as every tensor of a PEFT adapter does");
    out[entry.name.substr(prefix.size())] = &entry;
  }
  return out;
}

nlohmann::json peft_lora_config_json(const PeftLoraConfig& config) {
  return {{"peft_type", "LORA"},
          {"task_type", "CAUSAL_LM"},
          {"base_model_name_or_path", config.base_model},
          {"revision", nullptr},
          {"inference_mode", true},
          {"r", config.r},
          {"lora_alpha", config.lora_alpha},
          {"lora_dropout", config.lora_dropout},
          {"target_modules", config.target_modules},
          {"fan_in_fan_out", config.fan_in_fan_out},
          {"bias", "none"},
          {"use_rslora", false},
          {"use_dora", false},
          {"modules_to_save", nullptr},
          {"init_lora_weights", true},
          {"layers_to_transform", nullptr},
          {"layers_pattern", nullptr},
          {"rank_pattern", nlohmann::json::object()},
          {"alpha_pattern", nlohmann::json::object()}};
}

}  // namespace loom::formats
