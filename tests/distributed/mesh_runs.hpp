// mesh_runs.hpp: what the tensor-, sequence- and context-parallel tests share: a small llama manifest, a
// run on a layout of real processes (host launch, Gloo), its logged losses and gradient norms,
// and the closeness checks that compare it with one process.
#pragma once

#include "torch_doctest.hpp"  // before any torch or doctest header

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "dist_helpers.hpp"
#include "formats/weight_loading.hpp"
#include "run_host.hpp"

namespace loom_mesh_test {

namespace fs = std::filesystem;

// Grouped-query attention (4 query heads on 2 key/value heads) with Qwen2's q/k/v biases.
inline const std::string kLlama =
    "[model]\nuse = \"llama\"\nn_layer = 2\nn_head = 4\nn_kv_head = 2\nn_embd = 32\nseq_len = 16\nqkv_bias = true\n";

inline std::string manifest(const fs::path& dir, const std::string& model_table, const std::string& optimizer = "adamw",
                            double lr = 0.01) {
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\ndir = \"" << dir.string() << "\"\nsteps = 20\nlog_every = 1\nthreads = 1\n"
                      << model_table << "[data]\nuse = \"synthetic\"\nseq_len = 16\nbatch_size = 4\n"
                      << "[optimizer]\nuse = \"" << optimizer << "\"\nlr = " << lr << "\n"
                      << "[[trackers]]\nuse = \"jsonl\"\n[distributed]\ntimeout_s = 30\n";
  return path.string();
}

struct Logged {
  std::vector<double> loss, grad_norm;
};

inline Logged logged(const fs::path& run) {
  Logged out;
  std::istringstream in(loom_test::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    out.loss.push_back(record.at("loss"));
    out.grad_norm.push_back(record.at("grad_norm"));
  }
  return out;
}

// ranks processes: tensor_parallel = tensor, sequence_parallel = sequence, context_parallel =
// context, pipeline_parallel = pipeline, data parallel over the rest.
struct Layout {
  int ranks = 1, tensor = 1, sequence = 1, context = 1, pipeline = 1;
};

// The global batch stays 4 rows per step (data.batch_size = batch_rows / data ranks).
inline void train_steps(const std::string& m, const std::string& name, const Layout& at, const std::string& extra,
                        int batch_rows = 4) {
  const int data = at.ranks / (at.tensor * at.sequence * at.context * at.pipeline);
  const std::string run = "run " + m + " --set run.name=" + name + " --set distributed.tensor_parallel=" +
                          std::to_string(at.tensor) + " --set distributed.sequence_parallel=" +
                          std::to_string(at.sequence) +
                          (at.context > 1 ? " --set distributed.context_parallel=" + std::to_string(at.context) : "") +
                          (at.pipeline > 1 ? " --set distributed.pipeline_parallel=" + std::to_string(at.pipeline) : "") +
                          " --set data.batch_size=" + std::to_string(batch_rows / data) + extra;
  const auto r = loom_test::run_host(at.ranks == 1 ? run : "launch --nproc-per-node " + std::to_string(at.ranks) + " -- " + run);
  REQUIRE_MESSAGE(r.code == 0, r.err);
}

// The 20 steps' records of such a run.
inline Logged train(const std::string& m, const std::string& name, const Layout& at, const std::string& extra = "") {
  train_steps(m, name, at, extra);
  const Logged out = logged(fs::path(m).parent_path() / name);
  REQUIRE(out.loss.size() == 20);
  return out;
}

// Steps 11 to 20 of a run.
inline std::vector<double> after_step_10(const Logged& run) {
  return std::vector<double>(run.loss.begin() + 10, run.loss.end());
}

// The losses of steps 11 to 20 of run `name` on layout `at`, resumed from run `from`'s step-10
// checkpoint (both in m's folder).
inline std::vector<double> resumed_losses(const std::string& m, const std::string& name, const Layout& at,
                                          const std::string& from, const std::string& extra = "", int batch_rows = 4) {
  const fs::path dir = fs::path(m).parent_path();
  train_steps(m, name, at, " --set checkpoint.resume=" + (dir / from / "checkpoints" / "step-10").string() + extra,
              batch_rows);
  const Logged out = logged(dir / name);
  REQUIRE(out.loss.size() == 10);
  return out.loss;
}

inline void check_close(const std::vector<double>& expected, const std::vector<double>& actual, double tolerance) {
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(actual[i] - expected[i]) <= tolerance * std::abs(expected[i]));
  }
}

// Losses within 1e-5 for all 20 steps; the first step's gradient norm within 1e-5 (the same
// weights, the same batch); later norms, which AdamW's division by sqrt(v) makes more sensitive
// to the rounding of sums split across ranks, within 1e-4.
inline void check_same_run(const Logged& expected, const Logged& actual) {
  check_close(expected.loss, actual.loss, 1e-5);
  REQUIRE(actual.grad_norm.size() == expected.grad_norm.size());
  CHECK(std::abs(actual.grad_norm[0] - expected.grad_norm[0]) <= 1e-5 * expected.grad_norm[0]);
  check_close(expected.grad_norm, actual.grad_norm, 1e-4);
}

// A refused launch: exit code 2 (usage), every rank's failure naming `part`.
inline void check_refused(const std::string& args, const std::string& part) {
  const auto r = loom_test::run_host(args);
  CAPTURE(r.err);
  CHECK(r.code == 2);
  CHECK(loom_test::contains(r.err, part));
}

// Each tensor of `actual` within tolerance of `expected`'s norm (plus 1e-7 for tensors that are
// zero in exact arithmetic, such as the key bias's gradient, to which the loss is blind).
inline void check_tensors_close(const std::map<std::string, at::Tensor>& expected,
                                const std::map<std::string, at::Tensor>& actual, double tolerance) {
  REQUIRE(expected.size() == actual.size());
  for (const auto& [name, want] : expected) {
    CAPTURE(name);
    REQUIRE(actual.count(name));
    const at::Tensor& got = actual.at(name);
    REQUIRE(got.sizes() == want.sizes());
    CHECK((got - want).norm().item<double>() <= tolerance * want.norm().item<double>() + 1e-7);
  }
}

// A checkpoint's tensors read whole: every one of `expected` (one process's), of its shape and
// within 1e-3 of its largest value (the runs' rounding differs; the layout may not).
inline void check_whole_like(const std::map<std::string, at::Tensor>& expected,
                             const std::map<std::string, at::Tensor>& actual) {
  REQUIRE(actual.size() == expected.size());
  for (const auto& [name, t] : expected) {
    CAPTURE(name);
    REQUIRE(actual.count(name));
    REQUIRE(actual.at(name).sizes() == t.sizes());
    CHECK((actual.at(name) - t).abs().max().item<double>() <= 1e-3 * (t.abs().max().item<double>() + 1e-3));
  }
}

inline std::map<std::string, at::Tensor> minus(const std::map<std::string, at::Tensor>& a,
                                               const std::map<std::string, at::Tensor>& b) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : a) out[name] = t - b.at(name);
  return out;
}

// One step of m (SGD at lr 1, no clipping) from the same weights, in one process and on layout
// `at`: each weight changes by minus its gradient, so every change must agree within 1e-5 of
// its norm; the weight `trained` must have changed at all.
inline void check_one_step_changes(const std::string& m, const Layout& at, const std::string& trained) {
  const fs::path dir = fs::path(m).parent_path();
  const std::string one_step = " --set run.steps=1 --set checkpoint.every=1";
  train_steps(m, "start", {1}, one_step + " --set optimizer.lr=0.0");
  train_steps(m, "g1", {1}, one_step);
  train_steps(m, "g2", at, one_step);
  const auto start = loom_dist_test::weights(dir / "start" / "checkpoints" / "step-1");
  const auto one = minus(start, loom_dist_test::weights(dir / "g1" / "checkpoints" / "step-1"));
  CHECK(one.at(trained).norm().item<double>() > 1e-4);  // it did train
  check_tensors_close(one, minus(start, loom_dist_test::weights(dir / "g2" / "checkpoints" / "step-1")), 1e-5);
}

// A folder of tests/hf_models/transformers_reference.py's architecture `arch` (2 layers, a
// 64-token vocabulary) at dir / name, written by transformers; sizes: more of its options
// ("--layers 14 --hidden-size 512").
inline fs::path write_hf_folder(const fs::path& dir, const std::string& arch, const std::string& name,
                                const std::string& sizes = "") {
  const fs::path folder = dir / name;
  const auto written = loom_test::run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR +
                                            "/tests/hf_models/transformers_reference.py write --arch " + arch +
                                            " --out " + folder.string() + " --seed 3" + (sizes.empty() ? "" : " " + sizes));
  REQUIRE_MESSAGE(written.code == 0, written.err);
  return folder;
}

// A Mistral folder with a 5-position sliding window at dir / "mistral".
inline fs::path write_mistral_window(const fs::path& dir) { return write_hf_folder(dir, "mistral_window", "mistral"); }

// The weights of a Hugging Face folder a run exported ([export]), those `keep` accepts (all
// when it is empty).
inline std::map<std::string, at::Tensor> exported_weights(const fs::path& folder,
                                                         const std::function<bool(const std::string&)>& keep = {}) {
  const loom::formats::HfWeightSource source(folder.string());
  std::map<std::string, at::Tensor> out;
  for (const std::string& name : source.names())
    if (!keep || keep(name)) out[name] = source.view(name).clone();
  return out;
}

// A run's (eval_loss, eval_tokens) records, in order.
inline std::vector<std::pair<double, double>> evaluations(const fs::path& run) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(loom_test::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("eval_loss")) out.emplace_back(record.at("eval_loss"), record.at("eval_tokens"));
  }
  return out;
}

// Evaluation on a layout that cuts rows: the same eval_loss (1e-5) and eval_tokens (each
// position counted once) as one process, at both evaluations of a 20-step run.
inline void check_same_evaluations(const fs::path& one, const fs::path& cut) {
  const auto want = evaluations(one), got = evaluations(cut);
  REQUIRE(want.size() == 2);  // steps 10 and 20
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(std::abs(got[i].first - want[i].first) <= 1e-5 * want[i].first);
    CHECK(got[i].second == want[i].second);
  }
}

// The [eval_data] and eval hook the evaluation tests append to a manifest: 2 batches of 4 rows
// of 16, at steps 10 and 20.
inline const std::string kEvalEvery10 =
    "[eval_data]\nuse = \"synthetic\"\nseq_len = 16\nbatch_size = 4\nmax_batches = 2\n[[hooks]]\nuse = \"eval\"\nevery = 10\n";

}  // namespace loom_mesh_test
