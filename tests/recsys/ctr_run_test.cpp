// The recommendation workload end to end through the real host: loom-ctr-synth writes a
// Criteo-format dataset drawn from a known logistic model, configs/ctr-synth.toml trains the
// dlrm model on it (sparse tables updated by rowwise_adagrad, exact AUC after every window),
// and the evaluation AUC must come within 0.01 of the best any model can reach (the true
// probabilities' AUC, from truth.json). Then: two ranks train like one, a killed run resumes
// bit-exactly, and misconfigured manifests are refused in one line.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::contains;
using loom_test::run_host;
using loom_test::run_shell;

namespace {

const std::string kConfig = std::string(LOOM_SOURCE_DIR) + "/configs/ctr-synth.toml";

// The example's dataset, written once per test process.
const fs::path& synthetic_data() {
  static const fs::path dir = [] {
    const fs::path out = fs::path(LOOM_TEST_TMP) / "ctr-synth-data";
    fs::remove_all(out);
    const auto r = run_shell(std::string(LOOM_CTR_SYNTH_BIN) + " --out " + out.string());
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return out;
  }();
  return dir;
}

std::string data_files(const fs::path& data, int files) {
  std::string out;
  for (int i = 0; i < files; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "train-%03d.tsv", i);
    out += (i ? "," : "") + (data / name).string();
  }
  return out;
}

// The example manifest pointed at the test's data and folder.
std::string run_args(const fs::path& dir, const std::string& name, const std::string& files) {
  const fs::path data = synthetic_data();
  return kConfig + " --set run.dir=\"" + dir.string() + "\" --set run.name=" + name + " --set data.files=\"" + files +
         "\" --set eval_data.files=\"" + (data / "eval.tsv").string() + "\"";
}

// Every record of a run's metrics.jsonl that holds `key`.
std::vector<nlohmann::json> records_with(const fs::path& run, const std::string& key) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(loom_test::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains(key)) out.push_back(std::move(j));
  }
  return out;
}

std::string exported_weights(const fs::path& checkpoint, const fs::path& out) {
  const auto r = run_host("checkpoint export " + checkpoint.string() + " --format hf-safetensors --out " + out.string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return loom_test::read_file(out);
}

}  // namespace

TEST_CASE("configs/ctr-synth.toml: the evaluation AUC comes within 0.01 of the ground truth's") {
  const fs::path data = synthetic_data();
  const nlohmann::json truth = nlohmann::json::parse(loom_test::read_file(data / "truth.json"));
  const double best = truth.at("eval_auc");
  const fs::path dir = loom_test::tmp_dir("ctr-example");
  const auto r = run_host("run " + run_args(dir, "example", data_files(data, 4)));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto evals = records_with(dir / "example", "eval_auc");
  REQUIRE(evals.size() >= 4);  // after every window (file) of the pass
  const double last = evals.back().at("eval_auc");
  MESSAGE("eval AUC after each window: " << evals.front().at("eval_auc") << " ... " << last << "; ground truth "
                                         << best);
  CHECK(last > best - 0.01);
  CHECK(last <= best + 0.005);  // no model beats the true probabilities by more than noise
  CHECK(contains(r.err, "the data has no batch left"));
  // Training logs its own window AUC too (exact over the window's samples).
  CHECK_FALSE(records_with(dir / "example", "auc").empty());
  // `host eval` of the last checkpoint (the evaluate loop alone) gives the AUC the run logged.
  const auto e = run_host("eval " + run_args(dir, "example", data_files(data, 1)) + " --json");
  REQUIRE_MESSAGE(e.code == 0, e.err);
  const nlohmann::json evaluated = nlohmann::json::parse(e.out);
  CHECK(evaluated.at("step") == evals.back().at("step"));
  CHECK(evaluated.at("metrics").at("eval_auc").get<double>() == doctest::Approx(last).epsilon(1e-9));
}

TEST_CASE("two ranks train like one: the same samples per step, sparse rows summed across ranks") {
  const fs::path data = synthetic_data();
  const fs::path dir = loom_test::tmp_dir("ctr-ranks");
  const std::string files = data_files(data, 1);
  const auto one = run_host("run " + run_args(dir, "one", files) + " --set data.batch_size=256");
  REQUIRE_MESSAGE(one.code == 0, one.err);
  // Rows are dealt round-robin, so 2 ranks x 128 see the same 256 samples per step as 1 x 256.
  const auto two = run_host("launch --nproc-per-node 2 -- run " + run_args(dir, "two", files) +
                            " --set data.batch_size=128");
  REQUIRE_MESSAGE(two.code == 0, two.err);
  // The first logged window differs only by the order of float sums; 780 steps later the
  // difference has grown but stays small.
  const auto first_one = records_with(dir / "one", "loss"), first_two = records_with(dir / "two", "loss");
  REQUIRE_FALSE(first_one.empty());
  REQUIRE(first_one.size() == first_two.size());
  CHECK(first_one.front().at("loss").get<double>() == doctest::Approx(first_two.front().at("loss").get<double>()).epsilon(1e-5));
  const auto a = records_with(dir / "one", "eval_auc"), b = records_with(dir / "two", "eval_auc");
  REQUIRE(a.size() == b.size());
  REQUIRE_FALSE(a.empty());
  CHECK(a.back().at("step") == b.back().at("step"));
  const double auc_one = a.back().at("eval_auc"), auc_two = b.back().at("eval_auc");
  const double loss_one = a.back().at("eval_loss"), loss_two = b.back().at("eval_loss");
  MESSAGE("1 rank: eval AUC " << auc_one << ", loss " << loss_one << "; 2 ranks: " << auc_two << ", " << loss_two);
  CHECK(std::abs(auc_one - auc_two) < 1e-3);
  CHECK(std::abs(loss_one - loss_two) < 1e-3);
}

TEST_CASE("killed mid-run and resumed: the final weights equal an uninterrupted run's, byte for byte") {
  const fs::path data = synthetic_data();
  const fs::path dir = loom_test::tmp_dir("ctr-resume");
  // 1,000 of the file's 3,125 steps: the resume is as exact at any step, and the rest only
  // cost time.
  const std::string args = run_args(dir, "r", data_files(data, 1)) +
                           " --set data.batch_size=64 --set run.steps=1000 --set checkpoint.every=100"
                           " --set checkpoint.keep=20";
  const auto full = run_host("run " + args + " --set run.name=full");
  REQUIRE_MESSAGE(full.code == 0, full.err);
  // Killed once a checkpoint past the first window exists, then run again: resume = "auto".
  const fs::path ckpts = dir / "r" / "checkpoints";
  const std::string script = std::string(LOOM_HOST_BIN) + " run " + args +
                             " >/dev/null 2>&1 & pid=$!; for i in $(seq 1 6000); do [ -d " +
                             (ckpts / "step-400").string() +
                             " ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.01; done; kill -9 $pid; wait $pid";
  run_shell("sh -c '" + script + "'");
  REQUIRE(fs::exists(ckpts / "step-400"));
  const auto resumed = run_host("run " + args);
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  CHECK(contains(resumed.err, "resumed from"));
  // Both end at step 1000, whose checkpoint holds the final weights.
  const std::string last = "step-1000";
  REQUIRE(fs::exists(dir / "full" / "checkpoints" / last));
  CHECK(exported_weights(dir / "full" / "checkpoints" / last, dir / "full.safetensors") ==
        exported_weights(ckpts / last, dir / "resumed.safetensors"));
}

TEST_CASE("sparse tables and [sparse_optimizer] come together: each mistake is one line, exit 2") {
  const fs::path data = synthetic_data();
  const fs::path dir = loom_test::tmp_dir("ctr-refused");
  const std::string base = run_args(dir, "x", data_files(data, 1));
  // A manifest without [sparse_optimizer] (the example's removed from a copy).
  std::string text = loom_test::read_file(kConfig);
  const size_t at = text.find("\n[sparse_optimizer]");
  REQUIRE(at != std::string::npos);
  text.replace(at, text.find("\n\n", at + 1) - at, "");
  const fs::path copy = dir / "no-sparse-optimizer.toml";
  std::ofstream(copy) << text;
  auto r = run_host("run " + copy.string() + base.substr(kConfig.size()));
  CHECK(r.code == 2);
  CHECK(contains(r.err, "sparse tables"));
  CHECK(contains(r.err, "add [sparse_optimizer]"));
  r = run_host("run " + base + " --set distributed.shard=optimizer");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "every rank keeps whole"));
  r = run_host("run " + base + " --set sparse_optimizer.use=adamw");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "has no sparse_step"));
  r = run_host("run " + base + " --set model.table_rows='\"1000\"'");
  CHECK(r.code != 0);
  CHECK(contains(r.err, "outside its table"));
}
