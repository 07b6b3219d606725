// reference_test.cpp: hf_causal_lm against an implementation nobody here wrote into Loom:
// hf_reference.py (Python torch, float64, written from the architectures' published
// definitions) writes tiny random Hugging Face folders with its own safetensors writer and
// computes their logits and a few SGD steps. Loom must read each folder and agree to 1e-5
// relative; its exports must read back byte for byte and give the reference the same logits.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "checkpoint/hf_export.hpp"
#include "formats/hf_folder.hpp"
#include "model_harness.hpp"
#include "reference_io.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

constexpr int64_t kVocab = 64, kB = 2, kT = 12;
constexpr double kTolerance = 1e-5;

constexpr const char* kScript = "tests/hf_models/hf_reference.py";

void reference(const std::string& args) { run_reference(kScript, args); }

nlohmann::json reference_json(const std::string& args, const fs::path& out) {
  return loom_test::reference_json(kScript, args, out);
}

std::unique_ptr<loom::ModelInstance> import(const fs::path& dir) {
  return make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16}});
}

at::Tensor loom_logits(loom::ModelInstance& model, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  model.set_training(false);
  return model.logits(ids);
}

const char* kArchitectures[] = {"llama", "llama3", "llama_linear", "mistral", "qwen2", "qwen3", "gpt2"};

}  // namespace

TEST_CASE("every architecture's logits match the reference to 1e-5 relative") {
  const fs::path root = tmp_dir("hf_reference");
  const at::Tensor ids = tokens(kB, kT, kVocab, 11);
  const auto folder = [&](const std::string& arch, const std::string& variant) {
    return root / (arch + (variant == "F32" ? "" : "_bf16"));
  };
  const std::vector<std::string> variants{"F32", "BF16 --shards 3"};
  std::vector<std::string> lines;  // every folder written, then its logits, in one Python process
  for (const char* arch : kArchitectures)
    for (const std::string& variant : variants) {
      const fs::path dir = folder(arch, variant);
      lines.push_back("write --arch " + std::string(arch) + " --out " + dir.string() + " --seed 3 --dtype " + variant);
      lines.push_back("logits --model " + dir.string() + " --ids " + ids_text(ids) + " --out " +
                      (dir / "reference_logits.json").string());
    }
  run_reference_batch(kScript, lines, root / "references.txt");
  for (const char* arch : kArchitectures) {
    for (const std::string& variant : variants) {
      const std::string arch_name = arch;
      CAPTURE(arch_name);
      CAPTURE(variant);
      const fs::path dir = folder(arch, variant);
      const at::Tensor ref = as_tensor(nlohmann::json::parse(read_file(dir / "reference_logits.json"))["logits"]);
      auto model = import(dir);
      const double error = relative_error(loom_logits(*model, ids), ref);
      MESSAGE(std::string(arch) << " " << variant << ": max relative logit error " << error);
      CHECK(error < kTolerance);
    }
  }
}

TEST_CASE("import then export gives byte-identical tensors and an equivalent config.json") {
  const fs::path root = tmp_dir("hf_round_trip");
  std::vector<std::string> writes;
  for (const char* arch : kArchitectures)
    writes.push_back("write --arch " + std::string(arch) + " --out " + (root / arch).string() + " --seed 5 --dtype F32");
  run_reference_batch(kScript, writes, root / "references.txt");
  for (const char* arch : kArchitectures) {
    const std::string arch_name = arch;
    CAPTURE(arch_name);
    const fs::path source = root / arch, exported = root / (std::string(arch) + "_out");
    std::ofstream(source / "tokenizer.json") << R"({"version": "1.0", "model": {"type": "BPE"}})";
    auto model = import(source);
    loom::HfExportOptions options;
    options.dtype = at::kFloat;
    options.max_shard_bytes = 20000;  // several shards and an index
    const loom::HfExportResult written = loom::export_hf_folder(*model, exported, options);
    CHECK(written.shards > 1);
    const loom::formats::HfWeights a(source.string()), b(exported.string());
    CHECK(a.names() == b.names());
    for (const std::string& name : a.names()) {
      const auto *x = a.find(name), *y = b.find(name);
      REQUIRE(y != nullptr);
      CHECK(x->entry->shape == y->entry->shape);
      CHECK(std::string(x->entry->dtype->name) == y->entry->dtype->name);
      CHECK(std::memcmp(x->file->data(*x->entry), y->file->data(*y->entry), x->entry->end - x->entry->begin) == 0);
    }
    nlohmann::json before = loom::formats::read_json_object((source / "config.json").string());
    nlohmann::json after = loom::formats::read_json_object((exported / "config.json").string());
    CHECK(after["torch_dtype"] == "float32");
    before.erase("torch_dtype");
    after.erase("torch_dtype");
    CHECK(before == after);
    CHECK(fs::exists(exported / "generation_config.json"));
    CHECK(written.copied_files == 1);  // the tokenizer comes along
    CHECK(read_file(exported / "tokenizer.json") == read_file(source / "tokenizer.json"));
  }
}

TEST_CASE("SGD steps match the reference, and the trained model's export gives the reference the same logits") {
  const fs::path root = tmp_dir("hf_training");
  const at::Tensor ids = tokens(kB, kT, kVocab, 21), targets = tokens(kB, kT, kVocab, 22);
  constexpr double kLr = 0.5;
  constexpr int kSteps = 3;
  for (const char* arch : {"llama3", "qwen2", "qwen3", "gpt2"}) {
    const std::string arch_name = arch;
    CAPTURE(arch_name);
    const fs::path dir = root / arch, exported = root / (std::string(arch) + "_trained");
    reference("write --arch " + std::string(arch) + " --out " + dir.string() + " --seed 9 --dtype F32");
    const nlohmann::json ref = reference_json("sgd --model " + dir.string() + " --ids " + ids_text(ids) +
                                                  " --targets " + ids_text(targets) + " --lr " + std::to_string(kLr) +
                                                  " --steps " + std::to_string(kSteps),
                                              dir / "reference_sgd.json");
    auto model = import(dir);
    model->set_training(true);
    for (int step = 0; step < kSteps; ++step) {
      const at::Tensor loss = model->loss_sum(ids, targets) / double(ids.numel());
      const double expected = ref["losses"][size_t(step)].get<double>();
      MESSAGE(std::string(arch) << " step " << step + 1 << ": loom " << loss.item<double>() << ", reference " << expected);
      CHECK(std::abs(loss.item<double>() - expected) <= kTolerance * std::abs(expected));
      for (const loom::ModelParam& p : model->params())
        if (p.tensor->grad().defined()) p.tensor->grad().zero_();
      loss.backward();
      at::NoGradGuard no_grad;
      for (const loom::ModelParam& p : model->params())
        if (p.tensor->grad().defined()) p.tensor->sub_(p.tensor->grad() * kLr);
    }
    loom::HfExportOptions options;
    options.dtype = at::kFloat;
    loom::export_hf_folder(*model, exported, options);
    const at::Tensor ref_logits = as_tensor(
        reference_json("logits --model " + exported.string() + " --ids " + ids_text(ids), root / "trained.json")["logits"]);
    const double error = relative_error(loom_logits(*model, ids), ref_logits);
    MESSAGE(std::string(arch) << ": trained model's exported logits, max relative error " << error);
    CHECK(error < kTolerance);
    const double reimported = relative_error(loom_logits(*import(exported), ids), loom_logits(*model, ids).to(at::kDouble));
    CHECK(reimported == 0.0);
  }
}
