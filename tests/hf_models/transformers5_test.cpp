// transformers5_test.cpp: hf_causal_lm on folders that the real transformers (5.x, pinned in
// tools/python-requirements.txt) saved itself, against that library's own forward pass:
// transformers 5 writes the rotary settings as rope_parameters (no top-level rope_theta),
// dtype and layer_types, which Loom once read past and ran as another model (theta 10000).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "model_harness.hpp"
#include "reference_io.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

constexpr const char* kScript = "tests/hf_models/transformers_reference.py";
const char* kArchitectures[] = {"llama3", "llama_linear", "qwen2", "qwen3", "mistral", "gpt2"};

}  // namespace

TEST_CASE("folders saved by transformers 5 give transformers' own logits to 1e-5 relative") {
  const fs::path root = tmp_dir("transformers5");
  const at::Tensor ids = tokens(2, 12, 64, 5);
  for (const char* arch : kArchitectures) {
    const std::string name = arch;
    CAPTURE(name);
    const fs::path dir = root / name;
    run_reference(kScript, "write --arch " + name + " --out " + dir.string() + " --seed 3");
    const nlohmann::json ref_json =
        reference_json(kScript, "logits --model " + dir.string() + " --ids " + ids_text(ids), dir / "logits.json");
    const at::Tensor ref = as_tensor(ref_json["logits"]);
    auto model = make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16}});
    at::NoGradGuard no_grad;
    model->set_training(false);
    const double error = relative_error(model->logits(ids), ref);
    MESSAGE(name << " (transformers " << ref_json["transformers"].get<std::string>() << "): max relative logit error "
                 << error);
    CHECK(error < 1e-5);
  }
}
