// config_sweep_test.cpp: the rule against silent mis-loads, made structural (issue 49). For every
// family hf_causal_lm imports, config_sweep.py walks every field of transformers' own config
// class, sets each in turn, and leaves out each key of the config.json transformers saves, and the
// cases issue 49 found (sliding windows by family and version, Ministral's layer_types, aliases);
// transformers saves and runs each folder. Loom must give transformers' logits to 1e-5, or refuse
// naming the field (and refuse wherever transformers itself cannot load or run the folder).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "model_harness.hpp"
#include "reference_io.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

// Loom's logits for the folder, or its refusal (the folder's path replaced: it names the field).
struct Loaded {
  at::Tensor logits;
  std::string refusal;
};

Loaded load_with_loom(const fs::path& dir, const at::Tensor& ids) {
  Loaded out;
  try {
    auto model = make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16}});
    at::NoGradGuard no_grad;
    model->set_training(false);
    out.logits = model->logits(ids);
  } catch (const std::exception& e) {
    out.refusal = without_path(e.what(), dir.string(), "<folder>");
  }
  return out;
}

}  // namespace

TEST_CASE("every transformers config field, set or left out, gives transformers' logits or a refusal naming it") {
  const fs::path root = tmp_dir("config_sweep");
  const at::Tensor ids = tokens(2, 10, 64, 31);
  run_reference("tests/hf_models/config_sweep.py", "write --ids " + ids_text(ids) + " --out " + root.string());
  const nlohmann::json sweep = nlohmann::json::parse(read_file(root / "sweep.json"));
  const std::string version = sweep["transformers"].get<std::string>();
  std::map<std::string, int> outcomes;  // "match", "refused", "both refuse", "not built"
  for (const nlohmann::json& v : sweep["variants"]) {
    const std::string name = v["family"].get<std::string>() + ": " + v["name"].get<std::string>();
    const std::string field = v["field"].get<std::string>();
    CAPTURE(name);
    if (v["folder"].is_null()) {  // transformers' own config class refused the value
      MESSAGE(name << ": transformers does not build it (" << v["error"].get<std::string>().substr(0, 120) << ")");
      ++outcomes["not built"];
      continue;
    }
    const Loaded loom = load_with_loom(v["folder"].get<std::string>(), ids);
    const std::string expect = v["expect"].is_string() ? v["expect"].get<std::string>() : "";
    if (v.contains("error")) {  // transformers cannot load or run it: Loom must not compute it either
      CHECK_MESSAGE(!loom.refusal.empty(), "transformers: " << v["error"].get<std::string>());
      ++outcomes["both refuse"];
    } else if (!loom.refusal.empty()) {
      CHECK_MESSAGE(expect != "match", loom.refusal);
      const bool names_field = loom.refusal.find("\"" + field + "\"") != std::string::npos;
      CHECK_MESSAGE(names_field, "the refusal does not name \"" << field << "\": " << loom.refusal);
      MESSAGE(name << ": refused (" << loom.refusal.substr(names_field ? loom.refusal.find("\"" + field + "\"") : 0, 200)
                   << ")");
      ++outcomes["refused"];
    } else {
      const bool may_load = expect.empty() || expect == "match";
      CHECK_MESSAGE(may_load, "Loom loads it; expected a refusal naming " << expect);
      const double error = relative_error(loom.logits, as_tensor(v["logits"]));
      CHECK_MESSAGE(error < 1e-5, "max relative logit error " << error << " against transformers " << version);
      ++outcomes["match"];
    }
  }
  MESSAGE(sweep["variants"].size() << " folders against transformers " << version << ": " << outcomes["match"]
                                   << " match, " << outcomes["refused"] << " refused by name, "
                                   << outcomes["both refuse"] << " refused by both, " << outcomes["not built"]
                                   << " not built by transformers");
  // Every field of every family's config class was varied (or is written by save_pretrained).
  for (const auto& [family, fields] : sweep["fields"].items()) {
    for (const nlohmann::json& f : fields) {
      bool varied = f == "transformers_version" || f == "architectures";
      for (const nlohmann::json& v : sweep["variants"])
        varied = varied || (v["family"] == family && v["kind"] == "set" && v["field"] == f);
      CHECK_MESSAGE(varied, family << "." << f.get<std::string>() << " was never varied");
    }
  }
  CHECK(outcomes["match"] >= 300);
}
