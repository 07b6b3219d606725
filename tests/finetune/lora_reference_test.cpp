// lora_reference_test.cpp: LoRA adapters against an implementation nobody here wrote into Loom:
// lora_reference.py (Python torch, float64, from the LoRA paper and PEFT's published on-disk
// format, on top of hf_reference.py's architectures) writes a base Hugging Face folder and a
// PEFT adapter folder with random A and B. Loom loads the base through hf_causal_lm and the
// adapter through [model] init_from, and must agree with the reference on the logits (so the
// adapted layer computes W x + (alpha / r) B A x) and on the gradient of every adapter weight;
// its merged export must give the same logits, and its PEFT export must pass the reference's
// check of PEFT's format and load back into the reference unchanged.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>
#include <loom/model.h>

#include <filesystem>

#include "checkpoint/hf_export.hpp"
#include "checkpoint/peft_export.hpp"
#include "lora_cases.hpp"
#include "model_harness.hpp"
#include "plugin_slots.hpp"
#include "reference_io.hpp"
#include "train/init_weights.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

constexpr const char* kHf = "tests/hf_models/hf_reference.py";
constexpr const char* kLora = "tests/finetune/lora_reference.py";
constexpr int64_t kVocab = 64, kB = 2, kT = 12;
constexpr double kTolerance = 1e-5;

const Case kCases[] = {
    {"llama", {"q_proj", "v_proj"}, 4, 8.0},
    {"qwen3", {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, 2, 5.0},
    {"gpt2", {"c_attn", "c_proj", "c_fc"}, 3, 6.0},  // Conv1D weights (in, out): PEFT's fan_in_fan_out
};

}  // namespace

TEST_CASE("adapted logits and every adapter gradient match the reference; merged and PEFT exports agree") {
  const fs::path root = tmp_dir("lora_reference");
  const at::Tensor ids = tokens(kB, kT, kVocab, 31), targets = targets_with_ignored(kB, kT, kVocab, 32);
  // Each Python reference once a phase (tests/support/python_batch.py): the base folders; the
  // adapters, their logits and gradients; then the checks of Loom's PEFT exports.
  std::vector<std::string> bases, references, rereads;
  for (const Case& c : kCases) {
    const std::string arch = c.arch;
    const fs::path base = root / arch, adapter = root / (arch + "_adapter"), exported = root / (arch + "_peft");
    bases.push_back("write --arch " + arch + " --out " + base.string() + " --seed 4 --dtype F32");
    const std::string pair = " --model " + base.string() + " --adapter " + adapter.string();
    references.push_back("write-adapter --model " + base.string() + " --out " + adapter.string() + " --targets " +
                         joined(c.targets) + " --r " + std::to_string(c.rank) + " --alpha " + std::to_string(c.alpha) +
                         " --seed 5");
    references.push_back("logits" + pair + " --ids " + ids_text(ids) + " --out " + (root / (arch + "_logits.json")).string());
    references.push_back("grads" + pair + " --ids " + ids_text(ids) + " --targets=" + ids_text(targets) + " --out " +
                         (root / (arch + "_grads.json")).string());
    rereads.push_back("check-peft --adapter " + exported.string() + " --model " + base.string() + " --out " +
                      (root / (arch + "_check.json")).string());
    rereads.push_back("logits --model " + base.string() + " --adapter " + exported.string() + " --ids " + ids_text(ids) +
                      " --out " + (root / (arch + "_reread.json")).string());
  }
  run_reference_batch(kHf, bases, root / "bases.txt");
  run_reference_batch(kLora, references, root / "references.txt");
  for (const Case& c : kCases) {
    const std::string arch = c.arch;
    CAPTURE(arch);
    const fs::path base = root / arch, adapter = root / (arch + "_adapter");
    auto model = adapted_model(base, adapter, c);

    // Forward: W x + (alpha / r) B A x in every targeted layer.
    const at::Tensor ref_logits = as_tensor(nlohmann::json::parse(read_file(root / (arch + "_logits.json")))["logits"]);
    const at::Tensor adapted = logits_of(*model, ids);
    const double logit_error = relative_error(adapted, ref_logits);
    MESSAGE(arch << ": adapted logits, max relative error " << logit_error);
    CHECK(logit_error < kTolerance);

    // Backward: the gradient of the loss sum with respect to every lora_A and lora_B.
    const nlohmann::json ref = nlohmann::json::parse(read_file(root / (arch + "_grads.json")));
    model->set_training(true);
    const at::Tensor loss = model->loss_sum(ids, targets);
    CHECK(std::abs(loss.item<double>() - ref["loss"].get<double>()) < 1e-5 * std::abs(ref["loss"].get<double>()));
    loss.backward();
    size_t adapters = 0;
    double worst = 0;
    for (const loom::ModelParam& p : model->params()) {
      if (!(p.flags & LOOM_PARAM_FLAG_ADAPTER)) continue;
      ++adapters;
      const std::string key = std::string("base_model.model.") + p.name;
      CAPTURE(key);
      REQUIRE(ref["grads"].contains(key));
      REQUIRE(p.tensor->grad().defined());
      worst = std::max(worst, relative_error(p.tensor->grad(), as_tensor(ref["grads"][key])));
    }
    MESSAGE(arch << ": " << adapters << " adapter weights, worst gradient relative error " << worst);
    CHECK(adapters == ref["grads"].size());
    CHECK(worst < 1e-4);

    // Merged export: a plain Hugging Face folder with the same logits as the adapted model.
    loom::HfExportOptions merge;
    merge.dtype = at::kFloat;
    merge.merge_adapters = true;
    merge.adapter_scale = c.alpha / static_cast<double>(c.rank);
    const fs::path merged = root / (arch + "_merged");
    loom::export_hf_folder(*model, merged, merge);
    auto plain = make_model("hf_causal_lm", toml::table{{"from", merged.string()}, {"seq_len", 16}});
    const double merged_error = relative_error(logits_of(*plain, ids), adapted.to(at::kDouble));
    MESSAGE(arch << ": merged export against the adapted model, max relative logit error " << merged_error);
    CHECK(merged_error < kTolerance);

    // PEFT export: PEFT's format; the reference reads the same adapter back below.
    loom::PeftExportOptions peft;
    peft.adapters = adapters_of(c);
    const fs::path exported = root / (arch + "_peft");
    loom::export_peft_folder(*model, exported, peft);
  }
  run_reference_batch(kLora, rereads, root / "rereads.txt");
  for (const Case& c : kCases) {
    const std::string arch = c.arch;
    CAPTURE(arch);
    CHECK(nlohmann::json::parse(read_file(root / (arch + "_check.json")))["ok"] == true);
    const at::Tensor ref_logits = as_tensor(nlohmann::json::parse(read_file(root / (arch + "_logits.json")))["logits"]);
    const at::Tensor reread = as_tensor(nlohmann::json::parse(read_file(root / (arch + "_reread.json")))["logits"]);
    CHECK(relative_error(reread, ref_logits) < 1e-12);  // the adapter's F32 values, written back unchanged
  }
}

TEST_CASE("an adapted model starts as its base: B is zero, so the logits are the base's exactly") {
  const fs::path root = tmp_dir("lora_identity");
  const at::Tensor ids = tokens(kB, kT, kVocab, 41);
  for (const Case& c : kCases) {
    const std::string arch = c.arch;
    CAPTURE(arch);
    const fs::path base = root / arch;
    run_reference(kHf, "write --arch " + arch + " --out " + base.string() + " --seed 6 --dtype F32");
    auto plain = make_model("hf_causal_lm", toml::table{{"from", base.string()}, {"seq_len", 16}});
    const loom::SlotConfig slot =
        plugin_slot(LOOM_KIND_MODEL, "model", "hf_causal_lm", toml::table{{"from", base.string()}, {"seq_len", 16}});
    loom::RunContext run{LOOM_TEST_TMP, "cpu", 0, 0, 1, 1};
    run.adapters = adapters_of(c);
    loom::ModelInstance adapted(slot, run);
    size_t a = 0;
    for (const loom::ModelParam& p : adapted.params()) {
      if (!(p.flags & LOOM_PARAM_FLAG_ADAPTER)) continue;
      const bool is_b = p.name.find(".lora_B.") != std::string::npos;
      CHECK((is_b ? p.tensor->abs().max().item<double>() == 0.0 : p.tensor->abs().max().item<double>() > 0.0));
      a += !is_b;
    }
    CHECK(a > 0);
    CHECK(at::equal(logits_of(adapted, ids), logits_of(*plain, ids)));
  }
}
