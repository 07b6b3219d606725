// run_safety_test.cpp: nothing a run has written is lost and nothing silently wrong ends as a
// success (issue 21): run names stay inside run.dir, an earlier run's outputs are never
// overwritten without --overwrite, a finished run started again says so, options that are not
// finite or out of range are refused, a diverged run fails, and the resolved manifest in the
// run folder names plugin folders absolutely.
#include <doctest/doctest.h>

#include <string>

#include "scenario.hpp"

using namespace loom_test;

namespace {

fs::path write_manifest(const fs::path& dir, const std::string& text) {
  fs::create_directories(dir);
  return write_file(dir / "m.toml", text);
}

}  // namespace

TEST_CASE("run.name must be one safe folder name: exit 2 and nothing written outside run.dir") {
  for (const std::string name : {"..", ".", "a/b", "tab\\there", ""}) {
    CAPTURE(name);
    const fs::path dir = tmp_dir("run-name-" + std::to_string(std::hash<std::string>()(name)));
    const fs::path m = write_manifest(dir, base_manifest(dir));
    const Result r = host("run " + m.string() + " --set 'run.name=\"" + name + "\"'");
    CHECK(r.code == 2);
    CHECK_MESSAGE(contains(r.err, "must be one folder name"), r.err);
    CHECK(line_count(r.err) == 1);
    CHECK_FALSE(fs::exists(dir / "logs"));  // ".." would have written the run into dir itself
    CHECK_FALSE(fs::exists(dir / "runs"));
  }
}

TEST_CASE("an earlier run's outputs are never overwritten: a fresh start over them needs --overwrite") {
  const fs::path dir = tmp_dir("run-folder-rule");
  const fs::path m = write_manifest(dir, base_manifest(dir) + "[[trackers]]\nuse = \"jsonl\"\n");
  REQUIRE(host("run " + m.string()).code == 0);
  const fs::path metrics = run_dir(dir) / "metrics.jsonl";
  const std::string first = read_file(metrics);
  REQUIRE(!first.empty());

  const Result again = host("run " + m.string() + " --set run.seed=2");
  CHECK(again.code == 2);
  CHECK(line_count(again.err) == 1);
  CHECK_MESSAGE(contains(again.err, "holds the outputs of a finished run (metrics.jsonl)"), again.err);
  CHECK_MESSAGE(contains(again.err, "--overwrite"), again.err);
  CHECK(read_file(metrics) == first);  // untouched

  const Result replaced = host("run " + m.string() + " --set run.seed=2 --overwrite");
  CHECK_MESSAGE(replaced.code == 0, replaced.err);
  CHECK(read_file(metrics) != first);
  CHECK(contains(read_file(run_dir(dir) / "status.json"), "\"finished\""));
}

TEST_CASE("an attempt that did not finish (killed or failed before a checkpoint) starts again with a warning") {
  const fs::path dir = tmp_dir("run-folder-unfinished");
  const fs::path m = write_manifest(dir, base_manifest(dir) + "[[trackers]]\nuse = \"jsonl\"\n");
  const Result failed = host("run " + m.string() + " --set optimizer.lr=1e30");  // diverges: status failed
  REQUIRE(failed.code == 1);
  CHECK(contains(read_file(run_dir(dir) / "status.json"), "\"failed\""));
  const Result again = host("run " + m.string());
  CHECK_MESSAGE(again.code == 0, again.err);
  CHECK_MESSAGE(contains(again.err, "holds an earlier attempt that did not finish (status failed)"), again.err);
  CHECK(contains(read_file(run_dir(dir) / "status.json"), "\"finished\""));
}

TEST_CASE("a finished run started again says it is complete and exits 0, without a 0-step summary") {
  const fs::path dir = tmp_dir("run-finished");
  const fs::path m = write_manifest(dir, base_manifest(dir) + "[[trackers]]\nuse = \"jsonl\"\n[checkpoint]\n");
  REQUIRE(host("run " + m.string()).code == 0);
  const std::string metrics = read_file(run_dir(dir) / "metrics.jsonl");
  const Result again = host("run " + m.string());
  CHECK_MESSAGE(again.code == 0, again.err);
  CHECK_MESSAGE(contains(again.err, "already complete at step 3 of 3"), again.err);
  CHECK_FALSE(contains(again.err, "done: 0 steps"));
  CHECK(read_file(run_dir(dir) / "metrics.jsonl") == metrics);
}

TEST_CASE("float options that are not finite, and negative learning rates, decays and clip norms: exit 2") {
  const fs::path dir = tmp_dir("run-float-options");
  const fs::path m = write_manifest(dir, base_manifest(dir));
  const struct {
    const char* set;
    const char* phrase;
    bool host_checks;  // refused before anything is written; otherwise by the plugin as it starts
  } cases[] = {
      {"optimizer.lr=nan", "\"lr\" is nan; it must be a finite number", true},
      {"optimizer.lr=inf", "\"lr\" is inf; it must be a finite number", true},
      {"optimizer.lr=-0.1", "[optimizer] lr = -0.1 is negative", true},
      {"optimizer.momentum=nan", "\"momentum\" is nan", true},
      {"run.clip_grad_norm=-1.0", "clip_grad_norm", true},
      {"run.clip_grad_norm=nan", "clip_grad_norm", true},
      {"optimizer.weight_decay=-1.0", "weight_decay must be >= 0", false},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.set));
    fs::remove_all(run_dir(dir));
    const Result r = host("run " + m.string() + " --set " + c.set);
    CHECK(r.code == 2);
    CHECK(count_lines_starting(r.err, "error: ") == 1);
    CHECK_MESSAGE(contains(r.err, c.phrase), r.err);
    if (c.host_checks) {
      CHECK(line_count(r.err) == 1);
      CHECK_FALSE(fs::exists(run_dir(dir)));
    }
  }
}

TEST_CASE("a run whose loss ends non-finite fails (exit 1) and saves no checkpoint of the diverged model") {
  const fs::path dir = tmp_dir("run-diverged");
  const fs::path m = write_manifest(dir, base_manifest(dir, 6) + "[checkpoint]\nevery = 2\n");
  const Result r = host("run " + m.string() + " --set optimizer.lr=1e30");
  CHECK(r.code == 1);
  CHECK_MESSAGE(contains(r.err, "training diverged: the loss of the last step (6) is"), r.err);
  CHECK_MESSAGE(contains(r.err, "not saving a checkpoint at step 6"), r.err);
  CHECK_FALSE(fs::exists(run_dir(dir) / "checkpoints" / "step-6"));
}

TEST_CASE("the resolved manifest in the run folder names plugin folders by absolute path") {
  const fs::path dir = tmp_dir("run-plugin-paths");
  fs::create_directories(dir / "more-plugins");
  const fs::path m = write_manifest(dir, base_manifest(dir) + "[plugins]\npaths = [\"more-plugins\"]\n");
  REQUIRE(host("run " + m.string()).code == 0);
  const std::string resolved = read_file(run_dir(dir) / "manifest.toml");
  const bool absolute = contains(resolved, "'" + (dir / "more-plugins").string() + "'") ||
                        contains(resolved, "\"" + (dir / "more-plugins").string() + "\"");
  CHECK_MESSAGE(absolute, resolved);
  // Run again from the run folder's copy: the same plugins, and it resumes nothing odd.
  const Result from_copy = host("validate " + (run_dir(dir) / "manifest.toml").string());
  CHECK_MESSAGE(from_copy.code == 0, from_copy.err);
}

TEST_CASE("host validate reports every error in one pass, then what the sections say together") {
  const fs::path dir = tmp_dir("validate-all");
  write_file(dir / "a-file", "not a folder");
  const std::string text = "[run]\nname = \"t\"\ndir = " + lit((dir / "a-file" / "runs").string()) +
                           "\nsteps = 3\n"
                           "[model]\nuse = \"gpt\"\nn_layer = 1\nn_head = 2\nn_embd = 8\nseq_len = 16\nvocab_size = 256\n"
                           "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 32\n"
                           "[optimizer]\nuse = \"sgd\"\nlr = \"fast\"\n"
                           "[[trackers]]\nuse = \"no_such_tracker\"\n";
  const fs::path m = write_file(dir / "m.toml", text);
  const Result r = host("validate " + m.string());
  CAPTURE(r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(line_count(r.err) == 4);
  CHECK(count_lines_starting(r.err, "error: ") == 4);
  CHECK(contains(r.err, "option \"lr\" must be float, not string"));
  CHECK(contains(r.err, "no tracker named \"no_such_tracker\""));
  CHECK(contains(r.err, "[data] seq_len = 32 is longer than [model] seq_len = 16"));
  CHECK(contains(r.err, "cannot be written"));
  // `host run` stops at the first of them, with one line.
  const Result run = host("run " + m.string());
  CHECK(run.code == 2);
  CHECK(line_count(run.err) == 1);
}

TEST_CASE("the done line's losses are the logged ones: first and last log window, as metrics.jsonl has them") {
  const fs::path dir = tmp_dir("run-done-line");
  const fs::path m = write_manifest(dir, base_manifest(dir, 6) + "[[trackers]]\nuse = \"jsonl\"\n");
  const Result r = host("run " + m.string() + " --set run.log_every=3");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const std::vector<std::string> records = lines_of(read_file(run_dir(dir) / "metrics.jsonl"));
  REQUIRE(records.size() == 2);  // steps 3 and 6
  const auto loss_of = [](const std::string& record) {
    const size_t at = record.find("\"loss\":");
    REQUIRE(at != std::string::npos);
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", std::stod(record.substr(at + 7)));
    return std::string(text);
  };
  CHECK_MESSAGE(contains(r.err, "loss " + loss_of(records[0]) + " -> " + loss_of(records[1])), r.err);
}

TEST_CASE("host describe without a name lists the host tables and every installed component, exit 0") {
  const Result r = host("describe");
  CHECK(r.code == 0);
  CHECK(contains(r.out, "host tables:"));
  CHECK(contains(r.out, "checkpoint"));
  CHECK(contains(r.out, "optimizers:"));
  CHECK(contains(r.out, "adamw"));
  CHECK(contains(r.out, "trackers:"));
}
