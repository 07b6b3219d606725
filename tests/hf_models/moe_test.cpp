// moe_test.cpp: hf_causal_lm's mixtures of experts (Qwen3-MoE, Qwen2-MoE with its shared
// expert, Mixtral) on folders the real transformers saved, against that library's own forward
// and backward (moe_reference.py): logits, the auxiliary load-balancing loss, the training loss
// with it, every gradient (with activation checkpointing too); an export that transformers
// reads back; what is not built refused by name. (The grouped expert products: tests/ops.)
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "model_harness.hpp"
#include "reference_io.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

constexpr const char* kScript = "tests/hf_models/moe_reference.py";
const char* kArchitectures[] = {"qwen3_moe", "qwen2_moe", "mixtral"};

// A manifest training hf_causal_lm from `folder` on synthetic tokens, its [run] extended by `run`.
fs::path manifest_for(const fs::path& root, const fs::path& folder, const std::string& run, const std::string& rest) {
  const fs::path path = root / "m.toml";
  std::ofstream(path) << "[run]\ndir = \"" << root.string() << "\"\nthreads = 1\n" << run
                      << "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" << folder.string() << "\"\nseq_len = 16\n"
                      << "[data]\nuse = \"synthetic\"\nseq_len = 16\nbatch_size = 2\nvocab_size = 64\n" << rest;
  return path;
}

double metric(const loom::ForwardResult& r, const std::string& name) {
  for (const loom::ReportedMetric& m : r.metrics)
    if (m.name == name) return m.value.item<double>();
  FAIL("no metric " << name);
  return 0;
}

}  // namespace

TEST_CASE("Qwen3-MoE, Qwen2-MoE and Mixtral folders (transformers 5 and 4 spellings) give transformers' logits, aux loss and gradients") {
  const fs::path root = tmp_dir("moe-transformers");
  const at::Tensor ids = tokens(2, 12, 64, 5), targets = tokens(2, 12, 64, 6);
  std::vector<std::string> lines;  // every folder written, then trained once, in one Python process
  for (const char* arch : kArchitectures)
    for (const char* spelling : {"v5", "v4"}) {
      const fs::path dir = root / (std::string(arch) + "-" + spelling);
      lines.push_back(std::string("write --arch ") + arch + " --out " + dir.string() + " --seed 3 --spelling " + spelling);
      lines.push_back("train --model " + dir.string() + " --ids " + ids_text(ids) + " --targets " + ids_text(targets) +
                      " --out " + (dir / "train.json").string());
    }
  run_reference_batch(kScript, lines, root / "references.txt");
  for (const char* arch : kArchitectures)
    for (const char* spelling : {"v5", "v4"}) {
      const std::string name = std::string(arch) + "-" + spelling;
      CAPTURE(name);
      const fs::path dir = root / name;
      const nlohmann::json ref = nlohmann::json::parse(read_file(dir / "train.json"));
      auto model = make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16}});
      {
        at::NoGradGuard no_grad;
        model->set_training(false);
        const double error = relative_error(model->logits(ids), as_tensor(ref["logits"]));
        MESSAGE(name << ": max relative logit error " << error);
        CHECK(error < 1e-5);
      }
      model->set_training(true);
      const loom::ForwardResult r = model->forward(ids, targets);
      const double aux = ref["aux_loss"].get<double>(), loss = ref["loss"].get<double>();
      CHECK(std::abs(metric(r, "moe_aux_loss") - aux) < 1e-5 * aux);
      CHECK(std::abs(r.loss_sum.item<double>() - loss) < 1e-5 * loss);  // token loss + coef * aux per token
      CHECK(metric(r, "moe_layer1_imbalance") >= 1.0);
      CHECK(metric(r, "moe_layer1_router_entropy") > 0.0);
      r.loss_sum.backward();
      size_t compared = 0;
      const auto params = model->params();
      const double worst = worst_gradient_error(params, ref["grads"], compared);
      CHECK(compared == ref["grads"].size());
      CHECK(compared == params.size());  // untied: every parameter, each expert apart
      MESSAGE(name << ": " << compared << " gradients, max relative error " << worst);
      CHECK(worst < 1e-5);
      // Activation checkpointing runs every layer again in backward, routers included.
      auto recomputing = make_model("hf_causal_lm", toml::table{{"from", dir.string()}, {"seq_len", 16},
                                                                {"activation_checkpointing", "full"}});
      recomputing->set_training(true);
      const loom::ForwardResult again = recomputing->forward(ids, targets);
      CHECK(std::abs(again.loss_sum.item<double>() - loss) < 1e-5 * loss);
      again.loss_sum.backward();
      CHECK(worst_gradient_error(recomputing->params(), ref["grads"], compared) < 1e-5);
    }
}

TEST_CASE("a trained MoE run exports a folder transformers loads, with the same logits") {
  const fs::path root = tmp_dir("moe-export");
  run_reference(kScript, "write --arch qwen2_moe --out " + (root / "base").string() + " --seed 4");
  const fs::path manifest = manifest_for(root, root / "base", "name = \"tuned\"\nsteps = 3\n",
                                        "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n[checkpoint]\nevery = 3\n"
                                        "[[trackers]]\nuse = \"jsonl\"\n");
  const auto trained = run_host("run " + manifest.string());
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  const std::string logged = read_file(root / "tuned" / "metrics.jsonl");
  const nlohmann::json first = nlohmann::json::parse(logged.substr(0, logged.find('\n')));
  CHECK(first.contains("moe_aux_loss"));
  CHECK(first.contains("moe_layer0_imbalance"));
  const auto exported = run_host("export " + (root / "tuned").string() + " --dtype fp32 --out " + (root / "hf").string());
  REQUIRE_MESSAGE(exported.code == 0, exported.err);
  const at::Tensor ids = tokens(2, 10, 64, 9);
  const nlohmann::json ref = reference_json(kScript, "train --model " + (root / "hf").string() + " --ids " +
                                                         ids_text(ids) + " --targets " + ids_text(ids),
                                            root / "hf.json");
  auto model = make_model("hf_causal_lm", toml::table{{"from", (root / "hf").string()}, {"seq_len", 16}});
  auto base = make_model("hf_causal_lm", toml::table{{"from", (root / "base").string()}, {"seq_len", 16}});
  at::NoGradGuard no_grad;
  model->set_training(false);
  base->set_training(false);
  const at::Tensor logits = model->logits(ids);
  CHECK(relative_error(logits, as_tensor(ref["logits"])) < 1e-5);
  CHECK(relative_error(base->logits(ids), logits.to(at::kDouble)) > 1e-4);  // the weights did train
}

TEST_CASE("what a mixture of experts cannot do yet is refused in one line, with exit code 2") {
  const fs::path root = tmp_dir("moe-refusals");
  run_reference(kScript, "write --arch mixtral --out " + (root / "base").string() + " --seed 4");
  const fs::path manifest = manifest_for(root, root / "base", "steps = 1\n", "[optimizer]\nuse = \"sgd\"\nlr = 0.1\n");
  const auto refused = [&](const std::string& args, const std::string& part) {
    const auto r = run_host(args);
    CAPTURE(r.err);
    CHECK(r.code == 2);
    CHECK(contains(r.err, part));
  };
  const std::string run = "run " + manifest.string();
  refused(run + " --set 'lora.targets=[\"w1\"]'", "LoRA on experts is not built");
  refused("launch --nproc-per-node 2 -- " + run + " --set distributed.tensor_parallel=2",
          "a mixture of experts under [distributed] tensor_parallel > 1 is not built");
  nlohmann::json config = nlohmann::json::parse(read_file(root / "base" / "config.json"));
  config["router_jitter_noise"] = 0.01;
  std::ofstream(root / "base" / "config.json") << config.dump();
  refused(run, "router_jitter_noise");
}
