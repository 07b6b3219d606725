// [distributed] sparse_tables = "row_sharded" (issue 38) through the real host: dlrm's tables
// split by rows over 2 and 4 ranks train as the replicated tables do on the same data for 100
// steps (every logged loss and gradient norm, and every weight at the end, within 1e-6, the AUC
// within a few swapped pairs), each rank
// holding only its rows; in their checkpoints each rank writes its rows (every tensor within
// 1e-6 of the replicated run's, untouched rows bit-identical; compare_checkpoints.py joins the
// parts with safetensors), which resume bit for bit, across layouts within 1e-6, and on another
// number of ranks within 1e-6; what this slice does not build yet is refused in one line.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "python_torch.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;

namespace {

// One small Criteo-format file (30,000 rows, 200 ids per feature), written once per process.
const fs::path& small_data() {
  static const fs::path dir = [] {
    const fs::path out = fs::path(LOOM_TEST_TMP) / "row-sharded-data";
    fs::remove_all(out);
    const auto r = loom_test::run_shell(std::string(LOOM_CTR_SYNTH_BIN) + " --out " + out.string() +
                                        " --train-files 1 --rows-per-file 30000 --eval-rows 100");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return out;
  }();
  return dir;
}

// dlrm with mean pooling over two multi-hot features, rowwise_adagrad for the tables, AdamW
// for the MLPs; 16 steps of 256 samples a step over all ranks.
fs::path write_manifest(const fs::path& dir, int ranks, const std::string& extra = "") {
  fs::create_directories(dir);
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\nname = \"r\"\ndir = \"" << dir.string()
                      << "\"\nseed = 3\nsteps = 16\nlog_every = 2\n\n"
                         "[model]\nuse = \"dlrm\"\ntable_rows = \"5000\"\nembedding_dim = 8\nbottom_mlp = \"32\"\n"
                         "top_mlp = \"32\"\npooling = \"mean\"\n\n"
                         "[data]\nuse = \"criteo_tsv\"\nfiles = \""
                      << (small_data() / "train-000.tsv").string() << "\"\nbatch_size = " << 256 / ranks
                      << "\ntable_rows = \"5000\"\n\n"
                         "[optimizer]\nuse = \"adamw\"\nlr = 0.003\nweight_decay = 0.0\n\n"
                         "[sparse_optimizer]\nuse = \"rowwise_adagrad\"\nlr = 0.1\n\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                      << extra;
  return path;
}

std::vector<nlohmann::json> metrics(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(loom_test::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Trains on `ranks` ranks with the given sparse_tables; returns the records and the log.
// `extra` goes at the end of the manifest.
std::pair<std::vector<nlohmann::json>, std::string> train(const fs::path& dir, int ranks, const std::string& tables,
                                                          const std::string& name = "", const std::string& sets = "",
                                                          const std::string& extra = "") {
  const fs::path manifest = write_manifest(dir, ranks, extra);
  const auto r = run_host("launch --nproc-per-node " + std::to_string(ranks) + " -- run " + manifest.string() +
                          " --set run.name=" + (name.empty() ? tables : name) + " --set distributed.sparse_tables=\"" +
                          tables + "\"" + sets);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return {metrics(dir / (name.empty() ? tables : name)), r.err};
}

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

// compare_checkpoints.py's verdict on two checkpoint folders.
nlohmann::json compare(const fs::path& a, const fs::path& b) {
  std::string tried;
  const std::string python = loom_test::python_with_torch(tried);
  REQUIRE_MESSAGE(!python.empty(), "no python3 with torch (tried " << tried << ")");
  const auto r = loom_test::run_shell(python + " " + std::string(LOOM_SOURCE_DIR) +
                                      "/tests/recsys/compare_checkpoints.py " + a.string() + " " + b.string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return nlohmann::json::parse(r.out);
}

// [eval_data] over the 100 evaluation lines.
std::string eval_data() {
  return "\n[eval_data]\nuse = \"criteo_tsv\"\nfiles = \"" + (small_data() / "eval.tsv").string() +
         "\"\nbatch_size = 32\ntable_rows = \"5000\"\nmax_batches = 100\n";
}

// `host eval`'s loss for a checkpoint, its model evaluated in one process.
double eval_loss(const fs::path& dir, const fs::path& checkpoint) {
  const auto r = run_host("eval " + write_manifest(dir, 1, eval_data()).string() + " --checkpoint " +
                          checkpoint.string() + " --json");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return nlohmann::json::parse(r.out).at("metrics").at("eval_loss").get<double>();
}

// A run folder holding only `checkpoint` of another run, to resume from.
void seed_resume(const fs::path& checkpoint, const fs::path& run) {
  fs::remove_all(run);
  fs::create_directories(run / "checkpoints");
  fs::copy(checkpoint, run / "checkpoints" / checkpoint.filename(), fs::copy_options::recursive);
}

}  // namespace

TEST_CASE("row-sharded tables train as replicated ones at 2 and 4 ranks for 100 steps, each rank holding its rows") {
  for (const int ranks : {2, 4}) {
    INFO(ranks << " ranks");
    const fs::path dir = loom_test::tmp_dir("row-sharded-" + std::to_string(ranks));
    const std::string long_run = " --set run.steps=100 --set checkpoint.every=100";
    const auto [replicated, replicated_log] = train(dir, ranks, "replicated", "", long_run);
    const auto [sharded, sharded_log] = train(dir, ranks, "row_sharded", "", long_run);
    REQUIRE(replicated.size() == 50);
    REQUIRE(sharded.size() == replicated.size());
    for (size_t i = 0; i < sharded.size(); ++i) {
      INFO("step " << sharded[i].at("step"));
      CHECK(sharded[i].at("step") == replicated[i].at("step"));
      for (const std::string key : {"loss", "grad_norm", "logloss"})
        CHECK_MESSAGE(relative(sharded[i].at(key), replicated[i].at(key)) < 1e-6,
                      key << ": " << sharded[i].at(key) << " against " << replicated[i].at(key));
      // The window's AUC counts ordered (positive, negative) pairs: two scores 1e-7 apart (the
      // sums run in another order) may swap, which moves it by 1 / (positives x negatives),
      // about 2e-5 for a window of 512 samples. Allow a few such pairs.
      CHECK(std::abs(sharded[i].at("auc").get<double>() - replicated[i].at("auc").get<double>()) < 1e-4);
    }
    // 26 tables x 5000 rows x 8: each rank holds 1/N of the 1,040,000 table parameters.
    CHECK(loom_test::contains(replicated_log, "26 sparse tables (1040000 parameters"));
    CHECK(loom_test::contains(sharded_log, "26 sparse tables (" + std::to_string(1040000 / ranks) +
                                               " parameters, " ));
    CHECK(loom_test::contains(sharded_log, "this rank's rows, split by rows over " + std::to_string(ranks) + " ranks"));
    // After 100 steps every weight and optimizer value within 1e-6 of the replicated run's
    // (relative to its tensor's largest), and the rows no step touched bit-identical.
    const auto weights = compare(dir / "replicated/checkpoints/step-100", dir / "row_sharded/checkpoints/step-100");
    CHECK_MESSAGE(weights.at("worst").get<double>() < 1e-6, weights.dump());
    CHECK(weights.at("untouched_rows").get<int>() > 1000);
    CHECK(weights.at("untouched_differ") == 0);
  }
}

TEST_CASE("row-sharded checkpoints: each rank writes its rows; they resume on either layout") {
  const fs::path dir = loom_test::tmp_dir("row-sharded-checkpoints");
  const std::string save = " --set checkpoint.every=8";
  train(dir, 2, "replicated", "", save);
  train(dir, 2, "row_sharded", "", save);
  // The same run both ways: every tensor within 1e-6, rows no step touched bit-identical.
  const auto both = compare(dir / "replicated/checkpoints/step-16", dir / "row_sharded/checkpoints/step-16");
  INFO(both.dump());
  CHECK(both.at("missing").empty());
  CHECK(both.at("worst").get<double>() < 1e-6);
  CHECK(both.at("untouched_rows").get<int>() > 1000);
  CHECK(both.at("untouched_differ") == 0);
  // Exported whole: `host checkpoint export` puts every rank's rows together in one file.
  const fs::path exported = dir / "row_sharded.safetensors";
  const auto e = run_host("checkpoint export " + (dir / "row_sharded/checkpoints/step-16").string() + " --out " +
                          exported.string());
  REQUIRE_MESSAGE(e.code == 0, e.err);
  const auto whole = compare(dir / "row_sharded/checkpoints/step-16", exported);
  CHECK_MESSAGE(whole.at("exact") == true, whole.dump());
  // And evaluated in one process by `host eval`, as the replicated run's checkpoint is.
  CHECK(relative(eval_loss(dir / "eval", dir / "row_sharded/checkpoints/step-16"),
                 eval_loss(dir / "eval", dir / "replicated/checkpoints/step-16")) < 1e-6);
  // Resumed from step 8 on its own layout: bit for bit; a replicated checkpoint resumed with
  // row-sharded tables: within 1e-6.
  seed_resume(dir / "row_sharded/checkpoints/step-8", dir / "again");
  train(dir, 2, "row_sharded", "again", save);
  const auto again = compare(dir / "row_sharded/checkpoints/step-16", dir / "again/checkpoints/step-16");
  CHECK_MESSAGE(again.at("exact") == true, again.dump());
  seed_resume(dir / "replicated/checkpoints/step-8", dir / "across");
  train(dir, 2, "row_sharded", "across", save);
  const auto across = compare(dir / "replicated/checkpoints/step-16", dir / "across/checkpoints/step-16");
  CHECK_MESSAGE(across.at("worst").get<double>() < 1e-6, across.dump());
}

TEST_CASE("row-sharded evaluation: every rank looks its eval rows up together, as the replicated run scores") {
  const fs::path dir = loom_test::tmp_dir("row-sharded-eval");
  // 100 eval lines in batches of 32 a rank: 2 and 1 batches a rank at 2 ranks, 1 at 4 (one short).
  const std::string eval = eval_data() + "\n[[hooks]]\nuse = \"eval\"\nevery = 8\n";
  for (const int ranks : {2, 4}) {
    INFO(ranks << " ranks");
    const std::string n = std::to_string(ranks);
    const auto replicated = train(dir, ranks, "replicated", "replicated-" + n, "", eval).first;
    const auto sharded = train(dir, ranks, "row_sharded", "row_sharded-" + n, "", eval).first;
    int evaluations = 0;
    for (size_t i = 0; i < sharded.size(); ++i) {
      if (!sharded[i].contains("eval_loss")) continue;
      ++evaluations;
      INFO("step " << sharded[i].at("step"));
      REQUIRE(replicated[i].contains("eval_loss"));
      CHECK(sharded[i].at("eval_tokens") == 100);
      CHECK(relative(sharded[i].at("eval_loss"), replicated[i].at("eval_loss")) < 1e-6);
      CHECK(std::abs(sharded[i].at("eval_auc").get<double>() - replicated[i].at("eval_auc").get<double>()) < 1e-4);
    }
    CHECK(evaluations == 2);  // steps 8 and 16
  }
}

TEST_CASE("row-sharded runs start from [model] init_from, whole or in parts, each rank taking its rows") {
  const fs::path dir = loom_test::tmp_dir("row-sharded-init");
  const auto fresh = train(dir, 2, "replicated", "whole", " --set checkpoint.every=16").first;
  train(dir, 2, "row_sharded", "parts", " --set checkpoint.every=16");
  for (const std::string source : {"whole", "parts"}) {
    INFO("from " << source);
    const std::string init = " --set model.init_from=\"" + (dir / source / "checkpoints/step-16").string() + "\"";
    const auto replicated = train(dir, 2, "replicated", source + "-replicated", init).first;
    const auto sharded = train(dir, 2, "row_sharded", source + "-row_sharded", init).first;
    REQUIRE(sharded.size() == replicated.size());
    for (size_t i = 0; i < sharded.size(); ++i)
      CHECK(relative(sharded[i].at("loss"), replicated[i].at("loss")) < 1e-6);
    // Trained weights, not a fresh start: the same data from step 1 now scores better.
    CHECK(sharded.front().at("loss").get<double>() < fresh.front().at("loss").get<double>() - 0.01);
  }
}

TEST_CASE("a row-sharded checkpoint resumes on another number of ranks, rows and data position dealt anew") {
  const fs::path dir = loom_test::tmp_dir("row-sharded-rank-counts");
  // Windows of 2048 lines, 8 steps of 256 samples: step 9, after the first window's end (and one
  // batch into the next), saves.
  const std::string save = " --set data.window_rows=2048 --set checkpoint.every_epoch=true";
  train(dir, 2, "row_sharded", "", save);
  const fs::path at_window_end = dir / "row_sharded/checkpoints/step-9";
  REQUIRE(fs::exists(at_window_end / "index.json"));
  // Each rank wrote its own rows: rank 1 of 2 holds rows 2500-4999 of every 5000-row table.
  CHECK(fs::exists(at_window_end / "rank-00001/state.safetensors"));
  CHECK_FALSE(fs::exists(at_window_end / "rank-00002"));
  for (const int ranks : {4, 1}) {
    INFO(ranks << " ranks");
    const std::string name = "from2to" + std::to_string(ranks);
    seed_resume(at_window_end, dir / name);
    const auto [records, log] = train(dir, ranks, ranks > 1 ? "row_sharded" : "replicated", name, save);
    CHECK(loom_test::contains(log, "resume: world size 2 -> " + std::to_string(ranks)));
    // The same global batches from step 10 on: every tensor within 1e-6 of the 2-rank run's.
    const auto moved = compare(dir / "row_sharded/checkpoints/step-16", dir / name / "checkpoints/step-16");
    CHECK(moved.at("missing").empty());
    CHECK_MESSAGE(moved.at("worst").get<double>() < 1e-6, moved.dump());
  }
}

TEST_CASE("row-sharded tables: what is not built yet is refused in one line, exit 2") {
  const fs::path dir = loom_test::tmp_dir("row-sharded-refused");
  const fs::path with_export = write_manifest(dir, 2, "\n[export]\nat_end = true\n");
  const auto r = run_host("launch --nproc-per-node 2 -- run " + with_export.string() +
                          " --set distributed.sparse_tables=\"row_sharded\"");
  CHECK(r.code == 2);
  CHECK_MESSAGE(loom_test::contains(r.err, "[distributed] sparse_tables = \"row_sharded\" with [export] is not built yet"),
                r.err);
  const auto bad = run_host("run " + write_manifest(dir, 1).string() + " --set distributed.sparse_tables=\"rows\"");
  CHECK(bad.code == 2);
  CHECK_MESSAGE(loom_test::contains(bad.err, "sparse_tables"), bad.err);
}
