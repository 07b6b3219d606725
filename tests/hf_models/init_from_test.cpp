// init_from_test.cpp: `[model] init_from` through the host. A `llama` model started from a
// Hugging Face folder (written by the independent reference) trains exactly as hf_causal_lm
// reading the same folder does; started from a Loom checkpoint it trains exactly as from that
// checkpoint's Hugging Face export; changing init_from does not block a resume; a mismatch is refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "logged_losses.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

// The reference's tiny `llama` folder as the llama component's options.
const char* kLlamaOptions =
    "vocab_size = 64\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nn_embd = 32\nffn_hidden = 48\nseq_len = 16\n"
    "rope_theta = 10000.0\nrms_norm_eps = 1e-5\n";

fs::path manifest(const fs::path& dir, const std::string& model_lines) {
  const fs::path path = dir / "init.toml";
  std::ofstream(path) << "[run]\nsteps = 4\nlog_every = 1\n[model]\n" << model_lines
                      << "[data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 16\nvocab_size = 64\n"
                         "[optimizer]\nuse = \"sgd\"\nlr = 0.1\n[checkpoint]\nevery = 2\n"
                         "[[trackers]]\nuse = \"jsonl\"\n";
  return path;
}

std::string last_line(const std::string& text) {
  const std::string trimmed = text.substr(0, text.size() - (!text.empty() && text.back() == '\n'));
  return trimmed.substr(trimmed.rfind('\n') == std::string::npos ? 0 : trimmed.rfind('\n') + 1);
}

}  // namespace

TEST_CASE("init_from a Hugging Face folder or a Loom checkpoint; a resume may change it") {
  const fs::path dir = tmp_dir("hf_init_from");
  const fs::path folder = dir / "llama";
  const Result written = run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR +
                                   "/tests/hf_models/hf_reference.py write --arch llama --seed 4 --out " +
                                   folder.string());
  REQUIRE_MESSAGE(written.code == 0, written.err);

  const std::string imported =
      manifest(dir, "use = \"hf_causal_lm\"\nfrom = \"" + folder.string() + "\"\nseq_len = 16\n").string();
  const std::vector<double> reference = train_losses(imported, dir, "imported", "");
  const std::string llama =
      manifest(dir, std::string("use = \"llama\"\n") + kLlamaOptions + "init_from = \"" + folder.string() + "\"\n")
          .string();
  const std::vector<double> started = train_losses(llama, dir, "started", "");
  REQUIRE(started.size() == reference.size());
  for (size_t i = 0; i < started.size(); ++i) CHECK(started[i] == doctest::Approx(reference[i]).epsilon(1e-6));

  // From the Loom checkpoint at step 2 of that run, and from its fp32 export: the same weights,
  // so the same losses (data, optimizer and RNG start fresh in both).
  const fs::path checkpoint = dir / "started" / "checkpoints" / "step-2";
  const std::vector<double> continued =
      train_losses(llama, dir, "continued", "--set model.init_from='\"" + checkpoint.string() + "\"'");
  CHECK(continued[0] != doctest::Approx(started[0]));
  REQUIRE(run_host("export " + checkpoint.string() + " --dtype fp32 --out " + (dir / "step2_hf").string()).code == 0);
  const std::vector<double> from_export =
      train_losses(llama, dir, "from_export", "--set model.init_from='\"" + (dir / "step2_hf").string() + "\"'");
  CHECK(from_export == continued);

  // A resumed run takes its weights from its own checkpoint, so a changed init_from is no reason to refuse.
  const Result resumed = run_host("run " + llama + " --set run.dir=\"" + dir.string() +
                                  "\" --set run.name=started --set run.steps=6 --set model.init_from='\"" +
                                  checkpoint.string() + "\"'");
  INFO(resumed.err);
  CHECK(resumed.code == 0);

  const Result wrong = run_host("run " + llama + " --set run.dir=\"" + dir.string() +
                                "\" --set run.name=wrong --set model.n_embd=64");
  CHECK(wrong.code == 2);
  CHECK(contains(last_line(wrong.err), "init_from"));
  CHECK(contains(last_line(wrong.err), "init_strict = false"));
}
