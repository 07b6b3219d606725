#include "peft_fields.hpp"

#include <algorithm>
#include <iterator>

#include "format_error.hpp"

namespace loom::formats {
namespace {

using Use = PeftFieldUse;

// peft 0.21.2's LoraConfig, field by field (dataclasses.fields order).
constexpr PeftField kFields[] = {
    {"task_type", Use::harmless, "the task the wrapper was made for; the weights are the same"},
    {"peft_type", Use::read, ""},
    {"auto_mapping", Use::harmless, "which class peft's AutoPeftModel builds"},
    {"peft_version", Use::harmless, "bookkeeping"},
    {"base_model_name_or_path", Use::read, ""},
    {"revision", Use::harmless, "the base model's Hub revision; Loom is given the base folder"},
    {"inference_mode", Use::harmless, "whether peft froze the adapter; the host's [lora] decides"},
    {"r", Use::read, ""},
    {"target_modules", Use::read, ""},
    {"exclude_modules", Use::off_only, "it leaves some target_modules matches unadapted"},
    {"lora_alpha", Use::read, ""},
    {"lora_dropout", Use::read, ""},
    {"fan_in_fan_out", Use::read, ""},
    {"bias", Use::read, ""},
    {"use_rslora", Use::off_only, "rsLoRA scales by lora_alpha / sqrt(r) instead of lora_alpha / r"},
    {"modules_to_save", Use::off_only, "it replaces whole modules with trained copies"},
    {"init_lora_weights", Use::init_kind, ""},
    {"layers_to_transform", Use::off_only, "it adapts only the listed layers"},
    {"layers_pattern", Use::harmless, "read by peft only with layers_to_transform, which is refused"},
    {"rank_pattern", Use::off_only, "it gives some modules another rank"},
    {"alpha_pattern", Use::off_only, "it gives some modules another lora_alpha"},
    {"megatron_config", Use::off_only, "it builds Megatron's parallel LoRA layers"},
    {"megatron_core", Use::harmless, "read by peft only with megatron_config, which is refused"},
    {"trainable_token_indices", Use::off_only, "it trains embedding rows of chosen tokens"},
    {"loftq_config", Use::off_only, "LoftQ replaces the base weights by quantized ones"},
    {"eva_config", Use::harmless, "how EVA initialises A from activations; the file holds the trained A"},
    {"corda_config", Use::harmless, "read by peft only with init_lora_weights = \"corda\", which is refused"},
    {"lora_ga_config", Use::harmless, "read by peft only with init_lora_weights = \"lora_ga\", which is refused"},
    {"use_dora", Use::off_only, "DoRA adds a learned magnitude per output"},
    {"velora_config", Use::off_only, "VeLoRA changes how the adapted layers run"},
    {"alora_invocation_tokens", Use::off_only,
     "activated LoRA applies the adapter only from the invocation tokens on"},
    {"use_qalora", Use::off_only, "QA-LoRA pools the input in groups before A"},
    {"qalora_group_size", Use::harmless, "read by peft only with use_qalora, which is refused"},
    {"monteclora_config", Use::off_only, "MonteCLoRA samples the adapter's weights"},
    {"layer_replication", Use::off_only, "it repeats base layers to build a deeper model"},
    {"runtime_config", Use::harmless, "peft's runtime switches (GPU offload); not saved by peft"},
    {"lora_bias", Use::off_only, "it adds a bias to B"},
    {"target_parameters", Use::off_only, "it adapts bare parameters (MoE experts) rather than modules"},
    {"use_bdlora", Use::off_only, "block-diagonal LoRA places A and B in blocks"},
    {"arrow_config", Use::off_only, "Arrow routes between several adapters"},
    {"kasa_config", Use::off_only, "KaSA adds a singular-value adapter"},
    {"ensure_weight_tying", Use::off_only, "it ties adapted embedding and output layers"},
};

// PEFT writes a feature it does not use as null, false, or an empty object, list or string.
bool unset(const nlohmann::json& value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
         ((value.is_object() || value.is_array() || value.is_string()) && value.empty());
}

// init_lora_weights kinds that only say how A and B started. PiSSA, OLoRA, CorDA, LoftQ and
// LoRA-GA also rewrite the base layer's weights, so the adapter belongs to another base model.
bool starts_adapter_only(const nlohmann::json& value) {
  if (value.is_boolean()) return true;
  if (!value.is_string()) return false;
  const std::string kind = value.get<std::string>();
  return kind == "gaussian" || kind == "eva" || kind == "orthogonal";
}

}  // namespace

const PeftField* peft_lora_field(const std::string& name) {
  const auto it = std::find_if(std::begin(kFields), std::end(kFields), [&](const PeftField& f) { return name == f.name; });
  return it == std::end(kFields) ? nullptr : it;
}

void check_peft_lora_fields(const nlohmann::json& config, const std::string& path) {
  for (const auto& [key, value] : config.items()) {
    const PeftField* field = peft_lora_field(key);
    if (!field)
      invalid("'" + path + "': field " + key + " is not one of peft 0.21's LoraConfig fields that Loom knows (a newer "
              "peft?); refusing rather than loading the adapter without it");
    if (field->use == Use::off_only && !unset(value))
      invalid("'" + path + "': " + key + " is " + value.dump() + "; Loom loads plain LoRA adapters without it: " +
              field->why);
    if (field->use == Use::init_kind && !starts_adapter_only(value))
      invalid("'" + path + "': init_lora_weights is " + value.dump() + ", which also rewrites the base model's " +
              "weights; Loom applies adapters to the unchanged base (convert the adapter to plain LoRA first, as " +
              "peft's save_pretrained(path_initial_model_for_weight_conversion=...) does)");
  }
}

}  // namespace loom::formats
