// peft_original_test.cpp: LoRA adapters against the real peft (issue 35). peft writes an
// adapter for a base folder transformers saved; Loom reads it ([model] init_from) and must give
// peft's logits. Loom then trains the adapters one step and exports them in PEFT's format; peft
// reads that export and must give Loom's logits.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>
#include <loom/model.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/peft_export.hpp"
#include "lora_cases.hpp"
#include "reference_io.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

constexpr const char* kTransformers = "tests/hf_models/transformers_reference.py";
constexpr const char* kPeft = "tests/finetune/peft_original.py";

const Case kCases[] = {
    {"llama3", {"q_proj", "v_proj"}, 4, 8.0},
    {"qwen3", {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, 2, 5.0},
    {"gpt2", {"c_attn", "c_proj", "c_fc"}, 3, 6.0},  // Conv1D: peft's fan_in_fan_out
};

}  // namespace

TEST_CASE("peft's adapters load into Loom, and Loom's trained adapters load into peft, with the same logits") {
  const fs::path root = tmp_dir("peft_original");
  const at::Tensor ids = tokens(2, 12, 64, 41), targets = tokens(2, 12, 64, 42);
  // Each Python reference once a phase (tests/support/python_batch.py): the base folders, then
  // peft's adapters and their logits, then peft's logits of Loom's exports.
  std::vector<std::string> bases, adapters, rereads;
  for (const Case& c : kCases) {
    const std::string arch = c.arch;
    const fs::path base = root / arch, adapter = root / (arch + "_peft");
    bases.push_back("write --arch " + arch + " --out " + base.string() + " --seed 11");
    adapters.push_back("write --model " + base.string() + " --out " + adapter.string() + " --targets " + joined(c.targets) +
                       " --r " + std::to_string(c.rank) + " --alpha " + std::to_string(c.alpha) + " --seed 12");
    adapters.push_back("logits --model " + base.string() + " --adapter " + adapter.string() + " --ids " + ids_text(ids) +
                       " --out " + (root / (arch + "_peft_logits.json")).string());
    rereads.push_back("logits --model " + base.string() + " --adapter " + (root / (arch + "_loom")).string() +
                      " --ids " + ids_text(ids) + " --out " + (root / (arch + "_loom_logits.json")).string());
  }
  run_reference_batch(kTransformers, bases, root / "bases.txt");
  run_reference_batch(kPeft, adapters, root / "adapters.txt");
  std::vector<at::Tensor> trained_logits;
  for (const Case& c : kCases) {
    const std::string arch = c.arch;
    CAPTURE(arch);
    const fs::path base = root / arch, adapter = root / (arch + "_peft"), exported = root / (arch + "_loom");
    const auto adapted = adapted_model(base, adapter, c);
    loom::ModelInstance& model = *adapted;
    const nlohmann::json peft_logits = nlohmann::json::parse(read_file(root / (arch + "_peft_logits.json")));
    const double read_error = relative_error(logits_of(model, ids), as_tensor(peft_logits["logits"]));
    MESSAGE(arch << " (peft " << peft_logits["peft"].get<std::string>() << "): peft's adapter in Loom, max relative logit error "
                 << read_error);
    CHECK(read_error < 1e-5);

    // One SGD step on the adapters, then PEFT's format out (peft reads it back below).
    model.set_training(true);
    model.loss_sum(ids, targets).backward();
    {
      at::NoGradGuard no_grad;
      for (const loom::ModelParam& p : model.params())
        if ((p.flags & LOOM_PARAM_FLAG_ADAPTER) && p.tensor->grad().defined()) p.tensor->sub_(p.tensor->grad() * 0.05);
    }
    trained_logits.push_back(logits_of(model, ids));
    CHECK(relative_error(trained_logits.back(), as_tensor(peft_logits["logits"])) > 1e-4);  // the step changed the adapters
    loom::PeftExportOptions options;
    options.adapters = adapters_of(c);
    loom::export_peft_folder(model, exported, options);
  }
  run_reference_batch(kPeft, rereads, root / "rereads.txt");
  for (size_t i = 0; i < trained_logits.size(); ++i) {
    const std::string arch = kCases[i].arch;
    CAPTURE(arch);
    const double export_error = relative_error(
        trained_logits[i], as_tensor(nlohmann::json::parse(read_file(root / (arch + "_loom_logits.json")))["logits"]));
    MESSAGE(arch << ": Loom's trained adapter in peft, max relative logit error " << export_error);
    CHECK(export_error < 1e-5);
  }
}
