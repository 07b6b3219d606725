// peft_fields_test.cpp: no field of an adapter_config.json is ignored by accident (issue 49).
// Walks the LoraConfig of the peft the project pins: every field must be read by Loom, known
// not to change what a loaded adapter computes, or refused by name when set. The config peft
// writes with its defaults loads; each refused field, set, is refused naming it; and an
// activated-LoRA adapter config saved by peft itself is refused rather than loaded as plain LoRA.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <filesystem>
#include <fstream>
#include <string>

#include "format_error.hpp"
#include "peft_adapter.hpp"
#include "peft_fields.hpp"
#include "reference_io.hpp"

namespace fs = std::filesystem;
using loom::formats::PeftFieldUse;
using namespace loom_test;

namespace {

constexpr const char* kPeft = "tests/finetune/peft_original.py";

// Reads `config` as dir/adapter_config.json; the refusal's message, or "" when it loads.
std::string refusal_of(const fs::path& dir, const nlohmann::json& config) {
  fs::create_directories(dir);
  std::ofstream(dir / loom::formats::kPeftConfig) << config.dump(2);
  try {
    loom::formats::read_peft_lora_config(dir.string());
    return "";
  } catch (const loom::formats::FormatError& e) {
    return e.what();
  }
}

// A value that is not "off" for a field whose default is (null, false, {}, []).
nlohmann::json set_value(const nlohmann::json& off) {
  if (off.is_boolean()) return true;
  if (off.is_object()) return {{"any", 1}};
  return nlohmann::json::array({1, 2});
}

}  // namespace

TEST_CASE("every field of peft's LoraConfig is read, harmless or refused by name") {
  const fs::path root = tmp_dir("peft_fields");
  const nlohmann::json peft = reference_json(kPeft, "fields --out " + (root / "fields.json").string(), root / "fields.json");
  MESSAGE("peft " << peft["peft"].get<std::string>() << ": " << peft["fields"].size() << " LoraConfig fields");
  for (const auto& name : peft["fields"]) {
    CAPTURE(name);
    CHECK_MESSAGE(loom::formats::peft_lora_field(name.get<std::string>()) != nullptr,
                  "add it to formats/peft_fields.cpp: read, harmless (and why) or off_only");
  }
  const nlohmann::json saved = peft["saved"];
  REQUIRE(refusal_of(root / "defaults", saved).empty());

  int refused = 0, varied = 0;
  for (const auto& [key, value] : saved.items()) {
    const auto* field = loom::formats::peft_lora_field(key);
    REQUIRE(field != nullptr);
    CAPTURE(key);
    nlohmann::json changed = saved;
    if (field->use == PeftFieldUse::off_only) {
      changed[key] = set_value(value);
      const std::string why = refusal_of(root / key, changed);
      CHECK_MESSAGE(why.find(key + " is ") != std::string::npos, why);
      ++refused;
    } else if (field->use == PeftFieldUse::harmless) {
      changed[key] = value.is_string() ? nlohmann::json("other") : nlohmann::json(7);
      CHECK_MESSAGE(refusal_of(root / key, changed).empty(), key);
      ++varied;
    }
  }
  CHECK(refused >= 20);
  CHECK(varied >= 8);
  // A field this Loom has never heard of (a newer peft) is refused, not skipped.
  nlohmann::json future = saved;
  future["use_hyperlora"] = true;
  CHECK(refusal_of(root / "future", future).find("field use_hyperlora is not one of") != std::string::npos);
}

TEST_CASE("init_lora_weights: kinds that only start A and B load; kinds that rewrite the base weights are refused") {
  const fs::path root = tmp_dir("peft_fields_init");
  const nlohmann::json saved =
      reference_json(kPeft, "fields --out " + (root / "fields.json").string(), root / "fields.json")["saved"];
  for (const nlohmann::json kind : {nlohmann::json(true), nlohmann::json(false), nlohmann::json("gaussian"),
                                    nlohmann::json("eva"), nlohmann::json("orthogonal")}) {
    nlohmann::json c = saved;
    c["init_lora_weights"] = kind;
    CHECK_MESSAGE(refusal_of(root / "ok", c).empty(), kind.dump());
  }
  for (const char* kind : {"pissa", "pissa_niter_4", "olora", "corda", "loftq", "lora_ga"}) {
    nlohmann::json c = saved;
    c["init_lora_weights"] = kind;
    CHECK_MESSAGE(refusal_of(root / "refused", c).find("rewrites the base model's weights") != std::string::npos, kind);
  }
}

TEST_CASE("an activated LoRA (alora_invocation_tokens) and exclude_modules, saved by peft itself, are refused by name") {
  const fs::path root = tmp_dir("peft_fields_saved");
  for (const std::string set : {"alora_invocation_tokens=[5,6]", "exclude_modules=[\"k_proj\"]", "lora_bias=true"}) {
    const std::string key = set.substr(0, set.find('='));
    const fs::path dir = root / key;
    run_reference(kPeft, "config --out " + dir.string() + " --set '" + set + "'");
    try {
      loom::formats::read_peft_lora_config(dir.string());
      FAIL("loaded an adapter with " << set);
    } catch (const loom::formats::FormatError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(key + " is ") != std::string::npos, e.what());
    }
  }
}
