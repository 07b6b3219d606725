// peft_fields.hpp: every field of PEFT's LoraConfig and what Loom does with it, so that an
// adapter_config.json field Loom does not understand is refused by name, never ignored.
// tests/finetune/peft_fields_test.cpp walks peft's own LoraConfig (the pinned version) and fails
// when a field is missing here: a new peft then fails the suite instead of loading wrong.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace loom::formats {

enum class PeftFieldUse {
  read,       // lora_config_of reads and checks it (r, lora_alpha, target_modules, ...)
  harmless,   // does not change what a loaded adapter computes (bookkeeping, initialisation only)
  off_only,   // a feature Loom lacks: refused unless unset (null, false, empty)
  init_kind,  // init_lora_weights: how A and B started, except kinds that also change the base weights
};

struct PeftField {
  const char* name;
  PeftFieldUse use;
  const char* why;  // for harmless fields: why it does not matter; for off_only: what it would change
};

// The rule for one LoraConfig field, or nullptr when Loom does not know the field.
const PeftField* peft_lora_field(const std::string& name);

// Throws a FormatError naming `path` and the field for the first field of config that is
// unknown, or set where Loom cannot honour it.
void check_peft_lora_fields(const nlohmann::json& config, const std::string& path);

}  // namespace loom::formats
