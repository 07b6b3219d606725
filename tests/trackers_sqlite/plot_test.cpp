// tools/plot on real finished runs: one or several run directories give a PNG; a run without
// metrics.jsonl, or a bad argument, gives exit 2 and one line that says what to do.
#include <doctest/doctest.h>

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

  const fs::path both = dir / "both.png";
  r = run_shell(kPlot + " -o " + both.string() + " " + (dir / "a").string() + " " + (dir / "b" / "metrics.jsonl").string());
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(is_png(both));
  CHECK(r.err.empty());  // gnuplot had nothing to warn about
}

TEST_CASE("tools/plot: a run without metrics.jsonl, or a bad argument, exits 2 with one line") {
  const fs::path dir = loom_test::tmp_dir("plot-bad");
  fs::create_directories(dir / "no-metrics");
  auto r = run_shell(kPlot + " " + (dir / "no-metrics").string() + " -o " + (dir / "x.png").string());
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);
  CHECK(loom_test::contains(r.err, (dir / "no-metrics" / "metrics.jsonl").string() + " not found"));
  CHECK(loom_test::contains(r.err, "use = \"jsonl\""));
  CHECK_FALSE(fs::exists(dir / "x.png"));

  r = run_shell(kPlot + " " + (dir / "missing").string());
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);
  CHECK(loom_test::contains(r.err, "no such run directory"));

  r = run_shell(kPlot + " --bogus");
  CHECK(r.code == 2);
  CHECK(loom_test::line_count(r.err) == 1);

  r = run_shell(kPlot + " --help");
  CHECK(r.code == 0);
  CHECK(loom_test::contains(r.out, "usage: tools/plot RUN_DIR..."));
}
