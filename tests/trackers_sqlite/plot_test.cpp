// tools/plot on real finished runs: one or several runs give a PNG, read from whichever tracker
// wrote them (jsonl, csv or sqlite); without -o the picture goes next to the runs; a run without
// metrics, or a bad argument or file, gives exit 2 and one line that says what to do.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "run_host.hpp"
#include "small_run.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using loom_test::run_shell;

namespace {

const std::string kPlot = std::string(LOOM_SOURCE_DIR) + "/tools/plot";

bool is_png(const fs::path& file) {
  const std::string bytes = loom_test::read_file(file);
  return bytes.size() > 1000 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

// small_manifest with its jsonl tracker replaced by `trackers` (a [[trackers]] table), so the
// run has no metrics.jsonl and tools/plot must read the other tracker's output.
std::string manifest_with(const fs::path& dir, const std::string& name, const std::string& trackers) {
  const std::string path = loom_test::small_manifest(dir, name, 20, 2, "", name + ".toml");
  std::string text = loom_test::read_file(path);
  const std::string jsonl = "[[trackers]]\nuse = \"jsonl\"\n";
  const size_t at = text.find(jsonl);
  REQUIRE(at != std::string::npos);
  text.replace(at, jsonl.size(), trackers);
  std::ofstream(path) << text;
  return path;
}

// `cd DIR && tools/plot ARGS`: the default output place depends on the current folder.
loom_test::Result plot_in(const fs::path& dir, const std::string& args) {
  return run_shell("cd " + dir.string() + " && " + kPlot + " " + args);
}

}  // namespace

TEST_CASE("tools/plot draws one run, and several overlaid, into a PNG") {
  const fs::path dir = loom_test::tmp_dir("plot-runs");
  const std::string manifest = loom_test::small_manifest(dir, "a", 20, 2);
  REQUIRE(run_host("run " + manifest).code == 0);
  REQUIRE(run_host("run " + manifest + " --set run.name=b --set optimizer.lr=0.003").code == 0);

  const fs::path one = dir / "one.png";
  auto r = run_shell(kPlot + " " + (dir / "a").string() + " -o " + one.string());
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(is_png(one));
  CHECK(r.out == "wrote " + one.string() + "\n");

  const fs::path both = dir / "both.png";
  r = run_shell(kPlot + " -o " + both.string() + " " + (dir / "a").string() + " " + (dir / "b" / "metrics.jsonl").string());
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(is_png(both));
  CHECK(r.err.empty());  // gnuplot had nothing to warn about
}

TEST_CASE("tools/plot: without -o the picture goes into the run folder, or the folder holding several runs") {
  const fs::path dir = loom_test::tmp_dir("plot-default-out");
  const std::string manifest = loom_test::small_manifest(dir, "a", 10, 2);
  REQUIRE(run_host("run " + manifest).code == 0);
  REQUIRE(run_host("run " + manifest + " --set run.name=b").code == 0);
  fs::create_directories(dir / "elsewhere");

  // One run: RUN_DIR/curves.png, wherever the command runs; nothing in the current folder.
  auto r = plot_in(dir / "elsewhere", "../a");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out == "wrote " + (fs::canonical(dir) / "a" / "curves.png").string() + "\n");
  CHECK(is_png(dir / "a" / "curves.png"));
  CHECK_FALSE(fs::exists(dir / "elsewhere" / "curves.png"));

  // The printed path is relative to the current folder when the picture is inside it.
  r = plot_in(dir, "b/");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out == "wrote b/curves.png\n");
  CHECK(is_png(dir / "b" / "curves.png"));

  r = plot_in(dir / "a", ".");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out == "wrote curves.png\n");

  // Several runs: curves.png in the deepest folder holding them all, here dir itself.
  r = plot_in(dir / "elsewhere", "../a ../b/metrics.jsonl");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out == "wrote " + (fs::canonical(dir) / "curves.png").string() + "\n");
  CHECK(is_png(dir / "curves.png"));
  CHECK(r.err.empty());
}

TEST_CASE("tools/plot reads a run that only the csv tracker logged") {
  const fs::path dir = loom_test::tmp_dir("plot-csv");
  const auto run = run_host("run " + manifest_with(dir, "c", "[[trackers]]\nuse = \"csv\"\n"));
  REQUIRE_MESSAGE(run.code == 0, run.err);
  REQUIRE(fs::exists(dir / "c" / "metrics.csv"));
  REQUIRE_FALSE(fs::exists(dir / "c" / "metrics.jsonl"));

  auto r = plot_in(dir, "c");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out == "wrote c/curves.png\n");
  CHECK(is_png(dir / "c" / "curves.png"));
  CHECK(r.err.empty());

  // The csv tracker's other shapes: a header widened when eval_loss first appeared (blank
  // cells before), nan/inf cells, a quoted column name, and a resume that went back to step 3.
  fs::create_directories(dir / "hand");
  std::ofstream(dir / "hand" / "metrics.csv") << "step,loss,lr,\"odd,name\",grad_norm,tokens_per_s,eval_loss\n"
                                                 "1,5.0,0.1,,1.0,100,\n"
                                                 "2,4.5,0.1,,inf,100,4.6\n"
                                                 "3,4.0,0.1,,1.0,nan,\n"
                                                 "4,3.5,0.1,,1.0,100,3.6\n"
                                                 "3,4.1,0.2,,-inf,110,\n"
                                                 "4,3.9,0.2,,1.1,110,3.8\n";
  r = run_shell(kPlot + " " + (dir / "hand" / "metrics.csv").string() + " -o " + (dir / "hand.png").string());
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(is_png(dir / "hand.png"));
  CHECK(r.err.empty());

  // A CSV that the csv tracker did not write: one line, exit 2.
  std::ofstream(dir / "other.csv") << "a,b\n1,2\n";
  r = run_shell(kPlot + " " + (dir / "other.csv").string() + " -o " + (dir / "other.png").string());
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);
  CHECK(loom_test::contains(r.err, (dir / "other.csv").string() + " is not a metrics CSV"));
  CHECK_FALSE(fs::exists(dir / "other.png"));
}

TEST_CASE("tools/plot reads runs that only the sqlite tracker logged, from their folder or the database") {
  const fs::path dir = loom_test::tmp_dir("plot-sqlite");
  const std::string manifest = manifest_with(dir, "a", "[[trackers]]\nuse = \"sqlite\"\n");
  auto run = run_host("run " + manifest);
  REQUIRE_MESSAGE(run.code == 0, run.err);
  run = run_host("run " + manifest + " --set run.name=b --set optimizer.lr=0.003");
  REQUIRE_MESSAGE(run.code == 0, run.err);
  REQUIRE(fs::exists(dir / "runs.sqlite"));  // shared by both runs, in their parent folder
  REQUIRE_FALSE(fs::exists(dir / "a" / "metrics.jsonl"));

  // A run folder: its row in ../runs.sqlite.
  auto r = plot_in(dir, "a");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out == "wrote a/curves.png\n");
  CHECK(is_png(dir / "a" / "curves.png"));
  CHECK(r.err.empty());

  // The database: every run in it, into the folder that holds them.
  r = plot_in(dir, "runs.sqlite");
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(r.out == "wrote curves.png\n");
  CHECK(is_png(dir / "curves.png"));

  // --run picks runs by name or by run directory.
  r = run_shell(kPlot + " " + (dir / "runs.sqlite").string() + " --run b --run " + (dir / "a").string() + " -o " +
                (dir / "picked.png").string());
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(is_png(dir / "picked.png"));

  r = run_shell(kPlot + " " + (dir / "runs.sqlite").string() + " --run nope -o " + (dir / "nope.png").string());
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);
  CHECK(loom_test::contains(r.err, "--run nope matches no run"));
  CHECK(loom_test::contains(r.err, "a, b"));  // the runs there are
  CHECK_FALSE(fs::exists(dir / "nope.png"));

  // A SQLite file that is not Loom's, and a file that is not SQLite at all.
  REQUIRE(run_shell("sqlite3 " + (dir / "foreign.sqlite").string() + " 'CREATE TABLE t(x)'").code == 0);
  std::ofstream(dir / "text.sqlite") << "not a database\n";
  for (const char* name : {"foreign.sqlite", "text.sqlite"}) {
    CAPTURE(name);
    r = run_shell(kPlot + " " + (dir / name).string() + " -o " + (dir / "foreign.png").string());
    CHECK(r.code == 2);
    CHECK(loom_test::line_count(r.err) == 1);
    CHECK(loom_test::contains(r.err, (dir / name).string() + " is not a Loom runs database"));
  }
  CHECK_FALSE(fs::exists(dir / "foreign.png"));
}

TEST_CASE("tools/plot: a run folder with no metrics at all exits 2 with one line naming what it looked for") {
  const fs::path dir = loom_test::tmp_dir("plot-no-metrics");
  // A run that logged into runs.sqlite beside it, so the database exists but lacks this run.
  const auto run = run_host("run " + manifest_with(dir, "other", "[[trackers]]\nuse = \"sqlite\"\n"));
  REQUIRE_MESSAGE(run.code == 0, run.err);
  fs::create_directories(dir / "empty");

  const auto r = plot_in(dir, "empty");
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(loom_test::line_count(r.err) == 1);
  CHECK(loom_test::contains(r.err, "no metrics for run empty"));
  CHECK(loom_test::contains(r.err, "empty/metrics.jsonl"));
  CHECK(loom_test::contains(r.err, "empty/metrics.csv"));
  CHECK(loom_test::contains(r.err, (fs::canonical(dir) / "runs.sqlite").string()));
  CHECK(loom_test::contains(r.err, "use = \"jsonl\""));
  CHECK_FALSE(fs::exists(dir / "empty" / "curves.png"));
}

TEST_CASE("tools/plot: a bad argument exits 2 with one line") {
  const fs::path dir = loom_test::tmp_dir("plot-bad");
  auto r = run_shell(kPlot + " " + (dir / "missing").string());
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);
  CHECK(loom_test::contains(r.err, "no such run directory"));

  r = run_shell(kPlot + " --bogus");
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);

  fs::create_directories(dir / "run");
  std::ofstream(dir / "run" / "metrics.jsonl") << "{\"step\":1,\"loss\":2.5}\n";
  r = run_shell(kPlot + " " + (dir / "run").string() + " --run x");
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);
  CHECK(loom_test::contains(r.err, "--run picks runs of a .sqlite file"));

  r = run_shell(kPlot + " --help");
  CHECK(r.code == 0);
  CHECK(loom_test::contains(r.out, "usage: tools/plot RUN_DIR..."));
  CHECK(loom_test::contains(r.out, "RUN_DIR/curves.png"));
}
