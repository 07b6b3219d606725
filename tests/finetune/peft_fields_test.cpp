// peft_fields_test.cpp: no field of an adapter_config.json is ignored by accident (issue 49).
// Walks the LoraConfig of the peft the project pins: every field must be read by Loom, known
// not to change what a loaded adapter computes, or refused by name when set. The config peft
// writes with its defaults loads; each refused field, set, is refused naming it; and an
// activated-LoRA adapter config saved by peft itself is refused rather than loaded as plain LoRA.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <filesystem>
#include <fstream>
#include <string>

#include "formats/format_error.hpp"
#include "lora_cases.hpp"
#include "formats/peft_adapter.hpp"
#include "formats/peft_fields.hpp"
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

// The numbers behind the list above: every LoraConfig field set in turn (peft_sweep.py) on a
// Llama base transformers saved, the adapter made, trained away from its start and saved by
// peft, and run by peft. Loom must give peft's logits to 1e-5 or refuse naming the field.
TEST_CASE("every LoraConfig field, set on an adapter peft saved, gives peft's logits or a refusal naming it") {
  const fs::path root = tmp_dir("peft_sweep");
  const at::Tensor ids = tokens(2, 10, 64, 43);
  run_reference("tests/finetune/peft_sweep.py", "write --ids " + ids_text(ids) + " --out " + root.string());
  const nlohmann::json sweep = nlohmann::json::parse(read_file(root / "sweep.json"));
  int matched = 0, refused = 0, both = 0, not_built = 0;
  for (const nlohmann::json& v : sweep["variants"]) {
    const std::string field = v["field"].get<std::string>();
    CAPTURE(field);
    if (v["folder"].is_null()) {
      MESSAGE(field << ": peft does not build it (" << v["error"].get<std::string>().substr(0, 120) << ")");
      ++not_built;
      continue;
    }
    const fs::path adapter = v["folder"].get<std::string>();
    const nlohmann::json saved = nlohmann::json::parse(read_file(adapter / loom::formats::kPeftConfig));
    Case c{"llama", {}, saved.value("r", 0), saved.value("lora_alpha", 0.0)};
    if (saved["target_modules"].is_array())
      for (const auto& t : saved["target_modules"]) c.targets.push_back(t.get<std::string>());
    std::string refusal;
    at::Tensor logits;
    try {
      logits = logits_of(*adapted_model(root / "base", adapter, c), ids);
    } catch (const std::exception& e) {
      refusal = without_path(e.what(), adapter.string(), "<adapter>");
    }
    if (v.contains("error")) {
      CHECK_MESSAGE(!refusal.empty(), "peft: " << v["error"].get<std::string>());
      ++both;
    } else if (!refusal.empty()) {
      CHECK_MESSAGE(!field.empty(), refusal);  // peft's defaults load
      CHECK_MESSAGE(refusal.find(field) != std::string::npos, "the refusal does not name " << field << ": " << refusal);
      MESSAGE(field << ": refused (" << refusal.substr(refusal.find(field), 160) << ")");
      ++refused;
    } else {
      const double error = relative_error(logits, as_tensor(v["logits"]));
      CHECK_MESSAGE(error < 1e-5, "max relative logit error " << error << " against peft " << sweep["peft"]);
      ++matched;
    }
  }
  MESSAGE(sweep["variants"].size() << " adapters against peft " << sweep["peft"].get<std::string>() << ": " << matched
                                   << " match, " << refused << " refused by name, " << both << " refused by both, "
                                   << not_built << " not built by peft");
  CHECK(matched >= 10);
}
