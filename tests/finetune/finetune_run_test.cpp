// finetune_run_test.cpp: freezing and LoRA through the host. A Hugging Face folder written by the
// independent reference (hf_reference.py) is fine-tuned with some modules frozen and with LoRA
// adapters: the frozen weights come out bit-identical to the folder's, the rest trains; a run
// whose checkpoints store the frozen weights by reference resumes to the byte of an uninterrupted
// one, and refuses a base that changed since; bad manifests get one line and exit 2.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <cstring>
#include <filesystem>
#include <fstream>

#include "formats/hf_folder.hpp"
#include "logged_losses.hpp"
#include "reference_io.hpp"
#include "run_host.hpp"
#include "formats/safetensors.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

// A fine-tuning manifest for the reference's tiny llama folder; `extra`: more TOML.
fs::path manifest(const fs::path& dir, const fs::path& base, const std::string& extra) {
  const fs::path path = dir / "finetune.toml";
  std::ofstream(path) << "[run]\nsteps = 6\nlog_every = 1\nseed = 3\n"
                      << "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" << base.string() << "\"\nseq_len = 16\n"
                      << "[data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 16\nvocab_size = 64\n"
                      << "[optimizer]\nuse = \"adamw\"\nlr = 0.01\nweight_decay = 0.0\n"
                      << "[checkpoint]\nevery = 3\n[[trackers]]\nuse = \"jsonl\"\n"
                      << extra;
  return path;
}

fs::path base_folder(const fs::path& dir) {
  const fs::path base = dir / "base";
  run_reference("tests/hf_models/hf_reference.py", "write --arch llama --out " + base.string() + " --seed 8 --dtype F32");
  return base;
}

// The model/ tensors of a safetensors-backend checkpoint, by parameter name.
struct CheckpointTensors {
  loom::formats::SafetensorsFile file;
  explicit CheckpointTensors(const fs::path& step) : file((step / "state.safetensors").string()) {}
  const loom::formats::TensorEntry* find(const std::string& name) const { return file.find("model/" + name); }
  bool same_bytes(const std::string& name, const loom::formats::HfWeights& base) const {
    const auto* mine = find(name);
    const auto* theirs = base.find(name);
    REQUIRE(theirs != nullptr);
    return mine != nullptr && mine->end - mine->begin == theirs->entry->end - theirs->entry->begin &&
           std::memcmp(file.data(*mine), theirs->file->data(*theirs->entry), mine->end - mine->begin) == 0;
  }
};

// The lines of a run's stderr that report a failure (info lines about the start come before).
int error_lines(const std::string& err) {
  int n = 0;
  for (size_t at = 0; at < err.size(); at = err.find('\n', at) + 1) {
    n += err.compare(at, 7, "error: ") == 0;
    if (err.find('\n', at) == std::string::npos) break;
  }
  return n;
}

Result run(const fs::path& manifest_path, const fs::path& dir, const std::string& name, const std::string& extra = "") {
  return run_host("run " + manifest_path.string() + " --set run.dir=\"" + dir.string() + "\" --set run.name=" + name +
                  " " + extra);
}

}  // namespace

TEST_CASE("frozen modules come out bit-identical to the pretrained folder; the rest trains") {
  const fs::path dir = tmp_dir("finetune_freeze");
  const fs::path base = base_folder(dir);
  const fs::path m = manifest(dir, base, "");
  const Result r = run(m, dir, "frozen",
                       "--set 'model.freeze=[\"embed_tokens\", \"layers.0.\"]' --set checkpoint.frozen=include");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  // The start line says how many elements train and what each pattern matched.
  CHECK(contains(r.err, "parameters train, "));
  CHECK(contains(r.err, "frozen (freeze \"embed_tokens\": 1 tensor; freeze \"layers.0.\": 9 tensors)"));
  CHECK(contains(r.err, "[model] freeze \"layers.0.\": model.layers.0.self_attn.q_proj.weight, "));
  const loom::formats::HfWeights weights(base.string());
  const CheckpointTensors trained(dir / "frozen" / "checkpoints" / "step-6");
  size_t frozen = 0, changed = 0;
  for (const std::string& name : weights.names()) {
    const bool is_frozen = name == "model.embed_tokens.weight" || name.rfind("model.layers.0.", 0) == 0;
    CAPTURE(name);
    if (is_frozen) CHECK(trained.same_bytes(name, weights));
    frozen += is_frozen;
    changed += !is_frozen && !trained.same_bytes(name, weights);
  }
  CHECK(frozen == 10);
  CHECK(changed + frozen == weights.names().size());  // every trainable tensor moved
  const std::vector<double> losses = logged_losses(dir / "frozen");
  CHECK(losses.back() < losses.front());
}

TEST_CASE("LoRA keeps the base bit-identical, trains the adapters, and checkpoints hold only what trains") {
  const fs::path dir = tmp_dir("finetune_lora");
  const fs::path base = base_folder(dir);
  const fs::path m = manifest(dir, base, "[lora]\ntargets = [\"q_proj\", \"v_proj\"]\nrank = 4\nalpha = 8\n");
  const Result whole = run(m, dir, "include", "--set checkpoint.frozen=include");
  REQUIRE_MESSAGE(whole.code == 0, whole.err);
  const loom::formats::HfWeights weights(base.string());
  const CheckpointTensors with_base(dir / "include" / "checkpoints" / "step-6");
  for (const std::string& name : weights.names()) {
    CAPTURE(name);
    CHECK(with_base.same_bytes(name, weights));
  }
  CHECK(with_base.find("model.layers.1.self_attn.v_proj.lora_B.weight") != nullptr);

  // By reference (the default): the adapters and their optimizer state only.
  const Result lean = run(m, dir, "lean");
  REQUIRE_MESSAGE(lean.code == 0, lean.err);
  const CheckpointTensors adapters_only(dir / "lean" / "checkpoints" / "step-6");
  size_t model_tensors = 0;
  for (const auto& entry : adapters_only.file.tensors()) model_tensors += entry.name.rfind("model/", 0) == 0;
  CHECK(model_tensors == 8);  // 2 layers x (q_proj, v_proj) x (A, B)
  CHECK(logged_losses(dir / "lean") == logged_losses(dir / "include"));
  CHECK(fs::file_size(dir / "lean" / "checkpoints" / "step-6" / "state.safetensors") * 4 <
        fs::file_size(dir / "include" / "checkpoints" / "step-6" / "state.safetensors"));

  // Exports rebuild the base from its folder: merged (plain HF) and adapters alone (PEFT).
  const Result unmerged = run_host("export " + (dir / "lean").string() + " --out " + (dir / "hf").string());
  CHECK(unmerged.code == 2);
  CHECK(contains(unmerged.err, "--merge"));
  const Result merged = run_host("export " + (dir / "lean").string() + " --merge --dtype fp32 --out " + (dir / "merged").string());
  CHECK_MESSAGE(merged.code == 0, merged.err);
  const Result peft = run_host("export " + (dir / "lean").string() + " --format peft --out " + (dir / "peft").string());
  CHECK_MESSAGE(peft.code == 0, peft.err);
  CHECK(fs::exists(dir / "peft" / "adapter_model.safetensors"));
  CHECK(fs::exists(dir / "peft" / "adapter_config.json"));
}

TEST_CASE("a resume rebuilds the frozen weights from their source and is exact; a changed source is refused") {
  const fs::path dir = tmp_dir("finetune_resume");
  const fs::path base = base_folder(dir);
  const fs::path m =
      manifest(dir, base, "[lora]\ntargets = [\"q_proj\", \"down_proj\"]\nrank = 2\nalpha = 4\ndropout = 0.1\n");
  REQUIRE(run(m, dir, "straight").code == 0);
  REQUIRE(run(m, dir, "resumed", "--set run.steps=3").code == 0);
  const Result resumed = run(m, dir, "resumed");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  CHECK(contains(resumed.err, "resumed from"));
  // Weights, optimizer state and RNG to the byte (the metadata differs: elapsed time).
  const CheckpointTensors straight(dir / "straight" / "checkpoints" / "step-6");
  const CheckpointTensors again(dir / "resumed" / "checkpoints" / "step-6");
  size_t compared = 0;
  for (const auto& entry : straight.file.tensors()) {
    const auto* other = again.file.find(entry.name);
    CAPTURE(entry.name);
    REQUIRE(other != nullptr);
    REQUIRE(entry.end - entry.begin == other->end - other->begin);
    CHECK(std::memcmp(straight.file.data(entry), again.file.data(*other), entry.end - entry.begin) == 0);
    ++compared;
  }
  CHECK(compared == again.file.tensors().size());
  CHECK(compared > 8);

  // The base changes under the run: its checksum no longer matches the checkpoint's.
  run_reference("tests/hf_models/hf_reference.py", "write --arch llama --out " + base.string() + " --seed 9 --dtype F32");
  const Result refused = run(m, dir, "resumed", "--set run.steps=9");
  CHECK(refused.code == 2);
  CHECK(contains(refused.err, "checksum"));
  CHECK(error_lines(refused.err) == 1);
}

TEST_CASE("bad freeze and LoRA settings: one line, exit 2") {
  const fs::path dir = tmp_dir("finetune_bad");
  const fs::path base = base_folder(dir);
  struct Bad {
    std::string extra, set, says;
  };
  const Bad cases[] = {
      {"", "--set 'model.freeze=[\"embedding\"]'", "\"embedding\" matches no parameter"},
      {"", "--set 'model.freeze=[\"*\"]'", "nothing would train"},
      {"", "--set model.freeze=3", "must be an array of strings"},
      {"[lora]\ntargets = [\"q_prj\"]\n", "", "\"q_prj\" matches no linear layer"},
      {"[lora]\ntargets = []\n", "", "must name at least one module"},
      {"[lora]\ntargets = [\"q_proj\"]\n", "--set 'model.frozen_dtype=\"bf16\"'", "needs [run] precision = \"bf16\""},
      {"[lora]\ntargets = [\"q_proj\"]\nrank = 0\n", "", "rank must be at least 1"},
  };
  int i = 0;
  for (const Bad& bad : cases) {
    const fs::path case_dir = dir / std::to_string(i++);
    fs::create_directories(case_dir);
    const Result r = run(manifest(case_dir, base, bad.extra), case_dir, "bad", bad.set);
    CAPTURE(bad.says);
    CHECK(r.code == 2);
    CHECK(contains(r.err, bad.says));
    CHECK(error_lines(r.err) == 1);
  }
}
