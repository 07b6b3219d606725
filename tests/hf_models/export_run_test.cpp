// export_run_test.cpp: Hugging Face folders from the command line: `[export]` during a run
// (every, keep, at_end), `host export` of a run folder and of a checkpoint, and the refusals
// (a model that is not a Hugging Face architecture, an --out that exists), through the host.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "formats/hf_folder.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

fs::path manifest(const fs::path& dir, const std::string& model, const std::string& extra) {
  const fs::path path = dir / (model + ".toml");
  std::ofstream(path) << "[run]\nname = \"" << model << "\"\ndir = \"" << (dir / "runs").string()
                      << "\"\nsteps = 15\nlog_every = 5\n[model]\nuse = \"" << model << "\"\nvocab_size = 64\n"
                      << (model == "mlp_lm" ? "" : "n_layer = 1\nn_head = 2\nn_embd = 16\nseq_len = 16\n")
                      << "[data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 16\nvocab_size = 64\n"
                         "[optimizer]\nuse = \"sgd\"\n[checkpoint]\nevery = 15\n"
                      << extra;
  return path;
}

std::string last_line(const std::string& text) {
  const std::string trimmed = text.substr(0, text.size() - (!text.empty() && text.back() == '\n'));
  return trimmed.substr(trimmed.rfind('\n') == std::string::npos ? 0 : trimmed.rfind('\n') + 1);
}

}  // namespace

TEST_CASE("[export] writes Hugging Face folders during the run and keeps the newest") {
  const fs::path dir = tmp_dir("hf_export_run");
  const Result r = run_host("run " + manifest(dir, "llama", "[export]\nevery = 5\nkeep = 2\ndtype = \"fp16\"\n").string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const fs::path exports = dir / "runs" / "llama" / "hf";
  CHECK(!fs::exists(exports / "step-5"));
  CHECK(fs::exists(exports / "step-10" / "config.json"));
  REQUIRE(fs::exists(exports / "step-15" / "model.safetensors"));
  const auto config = loom::formats::read_json_object((exports / "step-15" / "config.json").string());
  CHECK(config["architectures"][0] == "LlamaForCausalLM");
  CHECK(config["torch_dtype"] == "float16");
  const loom::formats::HfWeights weights((exports / "step-15").string());
  CHECK(std::string(weights.find("model.embed_tokens.weight")->entry->dtype->name) == "F16");
}

TEST_CASE("host export of a run folder or a checkpoint; refusals are one line with exit 2") {
  const fs::path dir = tmp_dir("hf_export_cli");
  REQUIRE(run_host("run " + manifest(dir, "llama", "").string()).code == 0);
  const fs::path run = dir / "runs" / "llama";
  const Result from_run = run_host("export " + run.string() + " --out " + (dir / "a").string());
  INFO(from_run.err);
  CHECK(from_run.code == 0);
  CHECK(contains(from_run.out, "from_pretrained"));
  CHECK(fs::exists(dir / "a" / "model.safetensors"));
  const Result from_checkpoint = run_host("export " + (run / "checkpoints" / "step-15").string() + " --out " +
                                          (dir / "b").string() + " --dtype fp32 --max-shard-size 4KB");
  CHECK(from_checkpoint.code == 0);
  CHECK(fs::exists(dir / "b" / "model.safetensors.index.json"));
  CHECK(loom::formats::HfWeights((dir / "b").string()).file_count() > 1);

  const Result again = run_host("export " + run.string() + " --out " + (dir / "a").string());
  CHECK(again.code == 2);
  CHECK(contains(last_line(again.err), "already exists"));

  REQUIRE(run_host("run " + manifest(dir, "gpt", "").string()).code == 0);
  const Result gpt = run_host("export " + (dir / "runs" / "gpt").string() + " --out " + (dir / "c").string());
  CHECK(gpt.code == 0);
  CHECK(loom::formats::read_json_object((dir / "c" / "config.json").string())["architectures"][0] ==
        "GPT2LMHeadModel");

  REQUIRE(run_host("run " + manifest(dir, "mlp_lm", "").string()).code == 0);
  const Result mlp = run_host("export " + (dir / "runs" / "mlp_lm").string() + " --out " + (dir / "d").string());
  CHECK(mlp.code == 2);
  CHECK(contains(last_line(mlp.err), "not a Hugging Face architecture"));
  CHECK(!fs::exists(dir / "d"));

  const Result during = run_host("run " + manifest(dir, "mlp_lm", "[export]\n").string() + " --set run.name='\"m2\"'");
  CHECK(during.code == 2);
  CHECK(contains(last_line(during.err), "[export]"));
}
