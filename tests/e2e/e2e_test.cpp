// End to end through the real host binary and the real plugins: the quickstart trains,
// runs are reproducible, gradient accumulation weighs tokens exactly, and the CLI helps.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <vector>

#include "logged_losses.hpp"
#include "run_host.hpp"

using loom_test::run_host;
namespace fs = std::filesystem;

namespace {

const std::string kQuickstart = std::string(LOOM_SOURCE_DIR) + "/configs/quickstart.toml";

// Runs the quickstart with overrides into a fresh run directory; returns the logged losses.
std::vector<double> train(const std::string& name, const std::string& sets, int* code = nullptr) {
  const fs::path dir = loom_test::tmp_dir("e2e-" + name);
  const auto r = run_host("run " + kQuickstart + " --set run.dir=\"" + dir.string() + "\" --set run.name=" + name +
                          " " + sets);
  if (code) *code = r.code;
  else REQUIRE_MESSAGE(r.code == 0, r.err);
  return loom_test::logged_losses(dir / name);
}

}  // namespace

TEST_CASE("quickstart exits 0, writes metrics and its loss falls well below the first") {
  const fs::path dir = loom_test::tmp_dir("e2e-quickstart");
  const auto r = run_host("run " + kQuickstart + " --set run.dir=\"" + dir.string() + "\"");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const fs::path run = dir / "quickstart";
  CHECK(fs::exists(run / "manifest.toml"));
  std::istringstream lines(loom_test::read_file(run / "metrics.jsonl"));
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  REQUIRE(records.size() == 12);  // 300 steps, log_every 25
  CHECK(records.back().at("step") == 300);
  const double first = records.front().at("loss"), last = records.back().at("loss");
  CHECK(first > 5.0);       // about ln(256) = 5.55 at the start
  CHECK(last < 0.3 * first);
  for (const char* key : {"lr", "grad_norm", "tokens_per_s", "step_time_ms", "data_time_ms", "eta_s"})
    CHECK_MESSAGE(records.back().contains(key), key);
  // The resolved manifest records defaults the user never wrote.
  CHECK(loom_test::read_file(run / "manifest.toml").find("beta2 = 0.999") != std::string::npos);
  CHECK(r.err.find("done: 300 steps") != std::string::npos);
}

TEST_CASE("the same manifest and seed give identical loss sequences; another seed does not") {
  const std::string sets = "--set run.steps=30 --set run.log_every=1";
  const auto a = train("same-a", sets), b = train("same-b", sets);
  REQUIRE(a.size() == 30);
  CHECK(a == b);
  CHECK(train("other-seed", sets + " --set run.seed=7") != a);
}

TEST_CASE("grad_accum 2 x batch 8 matches one batch of 16: tokens weigh the same") {
  const std::string common = "--set run.steps=20 --set run.log_every=1 ";
  const auto whole = train("accum-1", common + "--set data.batch_size=16 --set run.grad_accum=1");
  const auto split = train("accum-2", common + "--set data.batch_size=8 --set run.grad_accum=2");
  REQUIRE(whole.size() == split.size());
  for (size_t i = 0; i < whole.size(); ++i) CHECK(split[i] == doctest::Approx(whole[i]).epsilon(1e-4));
}

TEST_CASE("run.global_batch_size derives grad_accum from the rows per micro-batch, or names why it cannot") {
  const std::string common = "--set run.steps=10 --set run.log_every=1 --set data.batch_size=8 ";
  const auto derived = train("global-16", common + "--set run.global_batch_size=16");
  const auto explicit_accum = train("global-accum-2", common + "--set run.grad_accum=2");
  CHECK(derived == explicit_accum);  // the same micro-batches in the same order: the same arithmetic
  const fs::path dir = loom_test::tmp_dir("e2e-global-bad");
  const auto odd = run_host("run " + kQuickstart + " --set run.dir=\"" + dir.string() + "\" " + common +
                            "--set run.global_batch_size=12");
  CHECK(odd.code == 2);
  // Seen before the run starts: no number of ranks and accumulation steps makes 12 from 8s.
  CHECK(odd.err.find("[run] global_batch_size = 12 is not a multiple of [data] batch_size = 8") != std::string::npos);
  const auto both = run_host("run " + kQuickstart + " --set run.dir=\"" + dir.string() + "\" " + common +
                             "--set run.global_batch_size=16 --set run.grad_accum=2");
  CHECK(both.code == 2);
  CHECK(both.err.find("sets both global_batch_size and grad_accum") != std::string::npos);
}

TEST_CASE("nan_guard abort ends a diverging run with exit 1 and one clear line") {
  int code = 0;
  train("diverge", "--set run.steps=20 --set run.clip_grad_norm=0 --set optimizer.lr=1e30 "
                   "--set hooks.0.action=abort", &code);
  CHECK(code == 1);
  const fs::path dir = loom_test::tmp_dir("e2e-diverge2");
  const auto r = run_host("run " + kQuickstart + " --set run.dir=\"" + dir.string() +
                          "\" --set run.steps=20 --set run.clip_grad_norm=0 --set optimizer.lr=1e30 "
                          "--set hooks.0.action=abort");
  CHECK(r.code == 1);
  CHECK(r.err.find("error: ") != std::string::npos);
  CHECK(r.err.find("nan_guard") != std::string::npos);
  CHECK(r.err.find("non-finite") != std::string::npos);
}

TEST_CASE("validate, describe, plugins, --help and --version help the user") {
  const auto v = run_host("validate " + kQuickstart);
  CHECK(v.code == 0);
  CHECK(v.out.find("use = \"adamw\"") != std::string::npos);
  const auto d = run_host("describe adamw");
  CHECK(d.code == 0);
  CHECK(d.out.find("weight_decay") != std::string::npos);
  CHECK(d.out.find("0.001") != std::string::npos);
  const auto run = run_host("describe run");
  CHECK(run.out.find("grad_accum") != std::string::npos);
  const auto checkpoint = run_host("describe checkpoint");  // a host table, not a component
  CHECK(checkpoint.code == 0);
  CHECK(checkpoint.out.find("keep_every") != std::string::npos);
  const auto all = run_host("describe --all");
  CHECK(all.code == 0);
  for (const char* entry : {"[distributed]", "timeout_s", "warmup_cosine", "nan_guard", "tensorboard"})
    CHECK_MESSAGE(all.out.find(entry) != std::string::npos, entry);
  const auto typo = run_host("describe adamv");
  CHECK(typo.code == 2);
  CHECK(typo.err.find("did you mean \"adamw\"") != std::string::npos);
  const auto p = run_host("plugins");
  CHECK(p.code == 0);
  for (const char* name : {"mlp_lm", "synthetic", "sgd", "adamw", "constant", "warmup_cosine", "console", "jsonl",
                           "nan_guard"})
    CHECK_MESSAGE(p.out.find(name) != std::string::npos, name);
  CHECK(p.out.find("torch-free") != std::string::npos);
  const auto h = run_host("--help");
  CHECK(h.code == 0);
  CHECK(h.out.find("exit codes") != std::string::npos);
  CHECK(run_host("--version").out.find("plugin ABI 1") != std::string::npos);
}

TEST_CASE("configs/gpt-bytes.toml: a GPT's loss falls well below a uniform byte guess on real text") {
  const fs::path dir = loom_test::tmp_dir("e2e-gpt-bytes");
  // A smaller GPT and fewer steps than the example, on the same corpus: this repository.
  const auto r = loom_test::run_shell(std::string("cd ") + LOOM_SOURCE_DIR + " && " + LOOM_HOST_BIN +
                                      " run configs/gpt-bytes.toml --set run.dir=\"" + dir.string() +
                                      "\" --set run.steps=60 --set run.log_every=10 --set model.n_layer=2"
                                      " --set model.n_embd=64 --set checkpoint.every=0");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::vector<double> losses;
  std::istringstream lines(loom_test::read_file(dir / "gpt-bytes" / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) losses.push_back(nlohmann::json::parse(line).at("loss"));
  REQUIRE(losses.size() == 6);
  CHECK(losses.front() > 4.0);      // near ln(256) = 5.55 at the start
  CHECK(losses.back() < 3.6);       // bytes of code and prose are far from uniform
  CHECK(r.err.find("mfu") != std::string::npos);
}
