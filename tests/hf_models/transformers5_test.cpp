// transformers5_test.cpp: hf_causal_lm on folders that the real transformers (5.x, pinned in
// tools/python-requirements.txt) saved itself, against that library's own forward pass:
// transformers 5 writes the rotary settings as rope_parameters (no top-level rope_theta),
// dtype and layer_types, which Loom once read past and ran as another model (theta 10000).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "checkpoint/hf_export.hpp"
#include "model_harness.hpp"
#include "reference_io.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

constexpr const char* kScript = "tests/hf_models/transformers_reference.py";
const char* kArchitectures[] = {"llama3", "llama_linear", "qwen2", "qwen3", "mistral", "gpt2",
                                "mistral_window", "qwen2_window", "qwen3_window", "llama_yarn", "qwen2_yarn",
                                "llama_dynamic"};
const char* kWindowed[] = {"mistral_window", "qwen2_window", "qwen3_window"};

}  // namespace

// Each folder twice: as transformers 5 writes it, and respelled as transformers 4 wrote it
// (top-level rope_theta and rope_scaling, torch_dtype, no layer_types), which transformers 5 reads.
TEST_CASE("folders saved by transformers 5, and in transformers 4's spelling, give transformers' own logits to 1e-5") {
  const fs::path root = tmp_dir("transformers5");
  const at::Tensor ids = tokens(2, 12, 64, 5);
  std::vector<std::pair<std::string, std::string>> cases;  // (architecture, spelling)
  for (const char* arch : kArchitectures)
    for (const char* spelling : {"v5", "v4"}) cases.emplace_back(arch, spelling);
  std::vector<std::string> lines;  // every folder written, then its logits, in one Python process
  for (const auto& [arch, spelling] : cases) {
    const fs::path dir = root / (arch + "-" + spelling);
    lines.push_back("write --arch " + arch + " --out " + dir.string() + " --seed 3 --spelling " + spelling);
    lines.push_back("logits --model " + dir.string() + " --ids " + ids_text(ids) + " --out " + (dir / "logits.json").string());
  }
  run_reference_batch(kScript, lines, root / "references.txt");
  for (const auto& [arch, spelling] : cases) {
    const std::string name = arch + "-" + spelling;
    CAPTURE(name);
    const fs::path dir = root / name;
    const nlohmann::json ref_json = nlohmann::json::parse(read_file(dir / "logits.json"));
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

// Sliding windows in the decode cache: token by token, the cached keys beyond the window are
// masked as in the whole-sequence forward (which the case above holds to transformers).
TEST_CASE("sliding windows: decoding token by token gives the whole sequence's logits") {
  const fs::path root = tmp_dir("transformers5-decode");
  const at::Tensor ids = tokens(2, 12, 64, 9);
  std::vector<std::string> writes;
  for (const char* arch : kWindowed)
    writes.push_back(std::string("write --arch ") + arch + " --out " + (root / arch).string() + " --seed 4");
  run_reference_batch(kScript, writes, root / "references.txt");
  for (const char* arch : kWindowed) {
    const std::string name = arch;
    CAPTURE(name);
    const fs::path dir = root / name;
    auto model = make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16}});
    at::NoGradGuard no_grad;
    model->set_training(false);
    const at::Tensor whole = model->logits(ids);  // (B, T, V)
    std::vector<at::Tensor> steps;
    for (int64_t t = 0; t < ids.size(1); ++t) steps.push_back(model->decode(ids.narrow(1, t, 1), t));
    const double error = relative_error(at::cat(steps, 1), whole.to(at::kDouble));
    MESSAGE(name << ": decoded against whole, max relative error " << error);
    CHECK(error < 1e-5);
  }
}

// Issue 35: `host eval` of a folder nobody has trained yet scores the model as the manifest
// builds it (the number anyone wants before fine-tuning) and says so; it is the score the run's
// own evaluation gives before its first update (learning rate 0).
TEST_CASE("host eval scores a fresh Hugging Face folder without a checkpoint") {
  const fs::path root = tmp_dir("transformers5-eval");
  const fs::path folder = root / "qwen3";
  run_reference(kScript, "write --arch qwen3 --out " + folder.string() + " --seed 6");
  const fs::path manifest = root / "m.toml";
  std::ofstream(manifest) << "[run]\nname = \"fresh\"\ndir = \"" << (root / "runs").string()
                          << "\"\nsteps = 1\nlog_every = 1\n[model]\nuse = \"hf_causal_lm\"\nfrom = \""
                          << folder.string() << "\"\nseq_len = 16\n"
                          << "[data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 16\nvocab_size = 64\n"
                             "[eval_data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 16\nvocab_size = 64\n"
                             "max_batches = 3\n[optimizer]\nuse = \"sgd\"\nlr = 0.0\n"
                             "[[trackers]]\nuse = \"jsonl\"\n[[hooks]]\nuse = \"eval\"\nevery = 1\n";
  const auto fresh = run_host("eval " + manifest.string() + " --json");
  REQUIRE_MESSAGE(fresh.code == 0, fresh.err);
  CHECK(contains(fresh.err, "as the manifest builds it"));
  const nlohmann::json e = nlohmann::json::parse(fresh.out);
  CHECK(e.at("checkpoint").is_null());
  CHECK(e.at("step") == 0);
  const double loss = e.at("metrics").at("eval_loss").get<double>();
  CHECK(loss > 3.0);  // about ln(64) for a random model
  const auto text = run_host("eval " + manifest.string());
  CHECK(contains(text.out, "no checkpoint: the model as the manifest builds it"));
  const auto trained = run_host("run " + manifest.string());
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  const nlohmann::json logged = nlohmann::json::parse(read_file(root / "runs" / "fresh" / "metrics.jsonl"));
  CHECK(logged.at("eval_loss").get<double>() == doctest::Approx(loss).epsilon(1e-9));
}

// One training step's gradients, greedy generation with the decode cache, and an export read
// back, each against transformers itself, for every family and rotary and window setting.
TEST_CASE("gradients, greedy generation and the export read back equal transformers'") {
  const fs::path root = tmp_dir("transformers5-train");
  const at::Tensor ids = tokens(2, 12, 64, 7), targets = tokens(2, 12, 64, 8);
  const at::Tensor prompt = ids.narrow(1, 0, 5);
  // Every folder, its gradients and its generation in one Python process; the exports' logits
  // in a second, after every export is written.
  std::vector<std::string> lines, export_lines;
  for (const char* arch : kArchitectures) {
    const fs::path dir = root / arch;
    lines.push_back(std::string("write --arch ") + arch + " --out " + dir.string() + " --seed 5");
    lines.push_back("grads --model " + dir.string() + " --ids " + ids_text(ids) + " --targets " + ids_text(targets) +
                    " --out " + (dir / "grads.json").string());
    lines.push_back("generate --model " + dir.string() + " --ids " + ids_text(prompt) + " --new 6 --out " +
                    (dir / "generate.json").string());
  }
  run_reference_batch(kScript, lines, root / "references.txt");
  std::vector<std::pair<std::string, at::Tensor>> exported_logits;  // (name, Loom's logits of ids)
  for (const char* arch : kArchitectures) {
    const std::string name = arch;
    CAPTURE(name);
    const fs::path dir = root / name;
    auto model = make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16}});
    model->set_training(true);
    const nlohmann::json ref = nlohmann::json::parse(read_file(dir / "grads.json"));
    const at::Tensor loss = model->loss_sum(ids, targets);
    loss.backward();
    CHECK(std::abs(loss.item<double>() - ref["loss"].get<double>()) < 1e-5 * std::abs(ref["loss"].get<double>()));
    size_t compared = 0;
    const double worst = worst_gradient_error(model->params(), ref["grads"], compared);
    CHECK(compared == ref["grads"].size());
    MESSAGE(name << ": " << compared << " gradients, max relative error " << worst);
    CHECK(worst < 1e-5);

    // Greedy generation through the model's key/value cache against model.generate.
    at::NoGradGuard no_grad;
    model->set_training(false);
    const nlohmann::json gen = nlohmann::json::parse(read_file(dir / "generate.json"));
    at::Tensor sequence = prompt.clone(), next = prompt;
    for (int64_t past = 0, i = 0; i < 6; ++i) {
      const at::Tensor logits = model->decode(next, past);  // (B, T, V)
      past += next.size(1);
      next = logits.select(1, logits.size(1) - 1).argmax(-1).unsqueeze(1);
      sequence = at::cat({sequence, next}, 1);
    }
    CHECK(at::equal(sequence, as_tensor(gen["tokens"]).to(at::kLong)));

    // The export (the source's config.json, the trained-from weights), read back by transformers below.
    const fs::path exported = root / (name + "_export");
    loom::HfExportOptions options;
    options.dtype = at::kFloat;
    loom::export_hf_folder(*model, exported, options);
    export_lines.push_back("logits --model " + exported.string() + " --ids " + ids_text(ids) + " --out " +
                           (root / (name + "_export.json")).string());
    exported_logits.emplace_back(name, model->logits(ids));
  }
  run_reference_batch(kScript, export_lines, root / "export_references.txt");
  for (const auto& [name, logits] : exported_logits) {
    CAPTURE(name);
    const double error =
        relative_error(logits, as_tensor(nlohmann::json::parse(read_file(root / (name + "_export.json")))["logits"]));
    MESSAGE(name << ": export read back by transformers, max relative logit error " << error);
    CHECK(error < 1e-5);
  }
}

// Issue 49: the Llama family's modeling code builds its embedding with padding_idx =
// pad_token_id, so the padding token's row gets no gradient from the lookup; Loom's moved.
// Ids that hold the padding token, gradients against transformers' own.
TEST_CASE("the padding token's embedding row gets no gradient, as transformers' padding_idx gives") {
  const fs::path root = tmp_dir("transformers5-padding");
  constexpr int64_t kPad = 5;
  at::Tensor ids = tokens(2, 12, 64, 17);
  ids.index_put_({0, 2}, kPad);
  ids.index_put_({1, 7}, kPad);
  if (ids[0][0].item<int64_t>() == kPad) ids.index_put_({0, 0}, kPad + 1);  // a token that is not padding
  const at::Tensor targets = tokens(2, 12, 64, 18);
  const char* architectures[] = {"llama3", "qwen3", "mistral"};
  std::vector<std::string> lines;  // the folders and their gradients in one Python process
  for (const char* arch : architectures) {
    const fs::path dir = root / arch;
    lines.push_back(std::string("write --arch ") + arch + " --out " + dir.string() + " --seed 9 --pad-token-id " +
                    std::to_string(kPad));
    lines.push_back("grads --model " + dir.string() + " --ids " + ids_text(ids) + " --targets " + ids_text(targets) +
                    " --out " + (dir / "grads.json").string());
  }
  run_reference_batch(kScript, lines, root / "references.txt");
  for (const char* arch : architectures) {
    const std::string name = arch;
    CAPTURE(name);
    const fs::path dir = root / name;
    auto model = make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16}});
    model->set_training(true);
    const nlohmann::json ref = nlohmann::json::parse(read_file(dir / "grads.json"));
    model->loss_sum(ids, targets).backward();
    size_t compared = 0;
    const double worst = worst_gradient_error(model->params(), ref["grads"], compared);
    CHECK(compared == ref["grads"].size());
    MESSAGE(name << " with pad_token_id " << kPad << ": max relative gradient error " << worst);
    CHECK(worst < 1e-5);
    const at::Tensor ref_rows = as_tensor(ref["grads"]["model.embed_tokens.weight"]);
    CHECK(ref_rows[kPad].abs().max().item<double>() == 0.0);  // what transformers does
    for (const auto& p : model->params())
      if (p.name == "model.embed_tokens.weight") {
        CHECK(p.tensor->grad()[kPad].abs().max().item<double>() == 0.0);
        CHECK(p.tensor->grad()[ids[0][0].item<int64_t>()].abs().max().item<double>() > 0.0);
      }
  }
}

// The report behind issue 35 saw the mis-load in sharded bf16 runs too. The same folders through
// two ranks with [distributed] shard = "parameters" read the same model as one process (whose
// logits the cases above hold to transformers): the first step's loss equals the single
// process's to 1e-5 in fp32, and within bf16's rounding under bf16 autocast.
TEST_CASE("sharded runs, fp32 and bf16, read the same model as one process") {
  const fs::path root = tmp_dir("transformers5-sharded");
  const char* architectures[] = {"llama3", "qwen3", "mistral_window", "qwen2_yarn"};
  std::vector<std::string> writes;
  for (const char* arch : architectures)
    writes.push_back(std::string("write --arch ") + arch + " --out " + (root / arch).string() + " --seed 13");
  run_reference_batch(kScript, writes, root / "references.txt");
  for (const char* arch : architectures) {
    const std::string name = arch;
    CAPTURE(name);
    const fs::path folder = root / name, manifest = root / (name + ".toml");
    std::ofstream(manifest) << "[run]\nname = \"one\"\ndir = \"" << (root / (name + "_runs")).string()
                            << "\"\nsteps = 1\nlog_every = 1\n[model]\nuse = \"hf_causal_lm\"\nfrom = \""
                            << folder.string() << "\"\nseq_len = 12\n"
                            << "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 12\nvocab_size = 64\n"
                               "[optimizer]\nuse = \"sgd\"\nlr = 0.0\n[[trackers]]\nuse = \"jsonl\"\n";
    const auto loss_of = [&](const std::string& command, const std::string& run, const std::string& sets) {
      const auto r = run_host(command + " " + manifest.string() + " --set run.name=" + run + " " + sets);
      REQUIRE_MESSAGE(r.code == 0, r.err);
      const nlohmann::json record =
          nlohmann::json::parse(read_file(root / (name + "_runs") / run / "metrics.jsonl"));
      return record.at("loss").get<double>();
    };
    // One process with the global batch the two ranks share (synthetic deals one sample order).
    const double one = loss_of("run", "one", "--set data.batch_size=8");
    const std::string sharded = "launch --nproc-per-node 2 -- run";
    const double fp32 = loss_of(sharded, "fp32", "--set distributed.shard=\"parameters\"");
    const double bf16 = loss_of(sharded, "bf16", "--set distributed.shard=\"parameters\" --set run.precision=\"bf16\"");
    MESSAGE(name << ": one process " << one << ", 2 ranks sharded fp32 " << fp32 << ", bf16 " << bf16);
    CHECK(std::abs(fp32 - one) < 1e-5 * one);
    CHECK(std::abs(bf16 - one) < 5e-3 * one);
  }
}
