// tracker_files_test.cpp: the jsonl, csv and tensorboard plugins driven through their C
// vtables with exact call sequences: a metric first seen late, odd metric names, resumes to
// an earlier step (twice), a restart with no checkpoint, torn last lines, other ranks.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <memory>

#include "tracker_driver.hpp"
#include "tracker_outputs.hpp"

using namespace loom_test;

namespace {

// A resolved manifest with every kind of value the hparams flattening meets.
void write_manifest(const fs::path& run_dir) {
  std::ofstream(run_dir / "manifest.toml") << "# Resolved manifest of this run: every default filled in.\n"
                                              "[data]\nbatch_size = 4\nuse = 'synthetic'\n\n"
                                              "[optimizer]\nlr = 0.0030000000000000001\nuse = 'adamw'\n\n"
                                              "[plugins]\npaths = ['/opt/a', '/opt/b']\n\n"
                                              "[run]\nclip_grad_norm = 1.0\nname = 'r'\npin = true\n\n"
                                              "[[trackers]]\npath = 'metrics.jsonl'\nuse = 'jsonl'\n\n"
                                              "[[trackers]]\ndir = 'tensorboard'\nuse = 'tensorboard'\n";
}

fs::path run_folder(const std::string& name) {
  const fs::path dir = tmp_dir("trackers-" + name);
  write_manifest(dir);
  return dir;
}

// The metrics of one log call; `session` shifts the values so tests can tell runs apart.
MetricValues train(int64_t step, int session = 0) {
  return {{"loss", 5.0 - 0.01 * double(step) + session},
          {"lr", 1e-3},
          {"grad_norm", 1.0 / double(step)},
          {"tokens_per_s", 1234.5 + double(session)}};
}

MetricValues with_eval(int64_t step, int session = 0) {
  MetricValues m = train(step, session);
  m.push_back({"eval_loss", 4.0 - 0.01 * double(step)});
  m.push_back({"eval_ppl", std::exp(4.0 - 0.01 * double(step))});
  return m;
}

// The three file trackers of one process, side by side on one run folder.
struct Session {
  TrackerDriver jsonl, csv, tb;
  explicit Session(const fs::path& dir, int rank = 0)
      : jsonl("jsonl", dir.string(), {}, rank), csv("csv", dir.string(), {}, rank), tb("tensorboard", dir.string(), {}, rank) {}
  void log(int64_t step, const MetricValues& m) {
    jsonl.log(step, m);
    csv.log(step, m);
    tb.log(step, m);
  }
  void resume(int64_t step) {
    jsonl.resume(step);
    csv.resume(step);
    tb.resume(step);
  }
};

double loss_at(const fs::path& jsonl, int64_t step) {
  for (const auto& j : read_jsonl(jsonl))
    if (j.at("step") == step) return j.at("loss").get<double>();
  return std::numeric_limits<double>::quiet_NaN();
}

void check_tensorboard_ok(const fs::path& dir, const std::string& extra) {
  const Result r = check_tensorboard(dir, extra);
  CHECK_MESSAGE(r.code == 0, r.err << r.out);
  MESSAGE(r.out);
}

}  // namespace

TEST_CASE("the three trackers record the same metrics; a metric first seen later widens the csv header") {
  const fs::path dir = run_folder("widen");
  {
    Session s(dir);
    s.log(5, train(5));
    s.log(10, with_eval(10));
    s.log(15, train(15));
    s.log(20, {{"loss", 1e300}, {"lr", -1e39}, {"grad_norm", std::nan("")}});  // float32 overflow, NaN
  }
  const CsvTable csv = read_csv(dir / "metrics.csv");
  CHECK(csv.header ==
        std::vector<std::string>{"step", "loss", "lr", "grad_norm", "tokens_per_s", "eval_loss", "eval_ppl"});
  REQUIRE(csv.rows.size() == 4);
  CHECK(csv.rows[0][5].empty());  // written before eval_loss existed, blank after the rewrite
  CHECK(csv.rows[2][6].empty());
  CHECK(std::stod(csv.rows[1][5]) == 4.0 - 0.1);
  check_csv_matches_jsonl(dir / "metrics.csv", dir / "metrics.jsonl");
  CHECK(jsonl_steps(dir / "metrics.jsonl") == std::vector<int64_t>{5, 10, 15, 20});
  CHECK_FALSE(fs::exists(dir / "metrics.csv.tmp"));
  check_tensorboard_ok(dir, "--files 1");
}

TEST_CASE("csv quotes odd metric names as RFC 4180 says and keeps non-finite values readable") {
  const fs::path dir = run_folder("quoting");
  const double inf = std::numeric_limits<double>::infinity();
  {
    TrackerDriver csv("csv", dir.string());
    csv.log(1, {{"a,b", std::nan("")}, {"say \"hi\"", inf}, {"two\nlines", -inf}, {"plain", 0.1}});
    csv.log(2, {{"plain", 1e300}, {"a,b", -2.5e-300}});
  }
  const std::string text = read_file(dir / "metrics.csv");
  CHECK(text.rfind("step,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",plain\n", 0) == 0);
  const CsvTable csv = read_csv(dir / "metrics.csv");
  CHECK(csv.header == std::vector<std::string>{"step", "a,b", "say \"hi\"", "two\nlines", "plain"});
  REQUIRE(csv.rows.size() == 2);
  CHECK(csv.rows[0] == std::vector<std::string>{"1", "nan", "inf", "-inf", "0.10000000000000001"});
  CHECK(std::stod(csv.rows[1][4]) == 1e300);
  CHECK(std::stod(csv.rows[1][1]) == -2.5e-300);
  CHECK(csv.rows[1][2].empty());
}

TEST_CASE("a resume drops what the interrupted run logged after the checkpoint, in every tracker, twice") {
  const fs::path dir = run_folder("resume");
  {
    Session a(dir);  // logs up to 30, checkpoint at 20
    for (int64_t step = 5; step <= 30; step += 5) a.log(step, step == 10 ? with_eval(step) : train(step));
  }
  {
    Session b(dir);  // resumes from the step-20 checkpoint, logs to 35
    b.tb.note("resumed from step-20");
    b.resume(20);
    for (int64_t step = 25; step <= 35; step += 5) b.log(step, train(step, 1));
  }
  {
    Session c(dir);  // resumes from step 30, now with eval metrics
    c.resume(30);
    for (int64_t step = 35; step <= 40; step += 5) c.log(step, with_eval(step, 2));
  }
  const std::vector<int64_t> expected = {5, 10, 15, 20, 25, 30, 35, 40};
  CHECK(jsonl_steps(dir / "metrics.jsonl") == expected);
  CHECK(csv_steps(dir / "metrics.csv") == expected);
  CHECK(loss_at(dir / "metrics.jsonl", 20) == train(20)[0].second);     // the checkpoint's own step stays
  CHECK(loss_at(dir / "metrics.jsonl", 25) == train(25, 1)[0].second);  // later ones are the resumed run's
  CHECK(loss_at(dir / "metrics.jsonl", 35) == train(35, 2)[0].second);
  check_csv_matches_jsonl(dir / "metrics.csv", dir / "metrics.jsonl");
  check_tensorboard_ok(dir, "--files 3 --resumed-at 20 --resumed-at 30");
}

TEST_CASE("resume(N) drops every later record, even those before the next logged step") {
  const fs::path dir = run_folder("resume-gap");
  {
    Session a(dir);
    for (int64_t step = 5; step <= 30; step += 5) a.log(step, train(step));
  }
  {
    Session b(dir);  // e.g. log_every changed from 5 to 30 on resume
    b.resume(10);
    b.log(30, train(30, 1));
  }
  CHECK(jsonl_steps(dir / "metrics.jsonl") == std::vector<int64_t>{5, 10, 30});
  CHECK(csv_steps(dir / "metrics.csv") == std::vector<int64_t>{5, 10, 30});
  check_csv_matches_jsonl(dir / "metrics.csv", dir / "metrics.jsonl");
  check_tensorboard_ok(dir, "--files 2 --resumed-at 10");
}

TEST_CASE("a restart with no checkpoint (no resume call) replaces the earlier attempt from its first step") {
  const fs::path dir = run_folder("restart");
  {
    Session a(dir);
    for (int64_t step = 5; step <= 15; step += 5) a.log(step, train(step));
  }
  {
    Session b(dir);
    for (int64_t step = 5; step <= 10; step += 5) b.log(step, train(step, 1));
  }
  CHECK(jsonl_steps(dir / "metrics.jsonl") == std::vector<int64_t>{5, 10});
  CHECK(csv_steps(dir / "metrics.csv") == std::vector<int64_t>{5, 10});
  CHECK(loss_at(dir / "metrics.jsonl", 5) == train(5, 1)[0].second);
  check_csv_matches_jsonl(dir / "metrics.csv", dir / "metrics.jsonl");
  check_tensorboard_ok(dir, "--files 2");
}

TEST_CASE("a process that ends before logging or resuming (a refused resume) supersedes nothing") {
  const fs::path dir = run_folder("no-op-session");
  {
    Session a(dir);
    for (int64_t step = 5; step <= 15; step += 5) a.log(step, train(step));
  }
  { Session b(dir); }
  CHECK(jsonl_steps(dir / "metrics.jsonl") == std::vector<int64_t>{5, 10, 15});
  CHECK(csv_steps(dir / "metrics.csv") == std::vector<int64_t>{5, 10, 15});
  check_tensorboard_ok(dir, "--files 2");
}

TEST_CASE("a torn last line or row, left by a crash mid-write, is dropped when the run goes on") {
  const fs::path dir = run_folder("torn");
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":5,\"loss\":1}\n{\"step\":10,\"loss\":2}\n{\"step\":15,\"lo";
  std::ofstream(dir / "metrics.csv") << "step,loss\n5,1\n10,2\n15,2.";
  {
    TrackerDriver jsonl("jsonl", dir.string()), csv("csv", dir.string());
    jsonl.resume(15);  // even when the checkpoint is at the torn step itself
    csv.resume(15);
    jsonl.log(20, {{"loss", 3}});
    csv.log(20, {{"loss", 3}});
  }
  CHECK(jsonl_steps(dir / "metrics.jsonl") == std::vector<int64_t>{5, 10, 20});
  CHECK(csv_steps(dir / "metrics.csv") == std::vector<int64_t>{5, 10, 20});
}

TEST_CASE("ranks other than 0 write nothing") {
  const fs::path dir = run_folder("rank1");
  {
    Session s(dir, /*rank=*/1);
    s.resume(0);
    s.log(5, train(5));
  }
  CHECK_FALSE(fs::exists(dir / "metrics.jsonl"));
  CHECK_FALSE(fs::exists(dir / "metrics.csv"));
  CHECK_FALSE(fs::exists(dir / "tensorboard"));
}

TEST_CASE("csv refuses to take over a file it did not write") {
  const fs::path dir = run_folder("foreign");
  std::ofstream(dir / "metrics.csv") << "name,value\nx,1\n";
  try {
    TrackerDriver csv("csv", dir.string());
    FAIL("create succeeded");
  } catch (const std::runtime_error& e) {
    CHECK(contains(e.what(), "not a metrics CSV"));
  }
  CHECK(read_file(dir / "metrics.csv") == "name,value\nx,1\n");
}

TEST_CASE("tensorboard options: another folder, no hparams") {
  const fs::path dir = run_folder("tb-options");
  {
    TrackerDriver tb("tensorboard", dir.string(), {{"dir", "tb-elsewhere"}, {"hparams", "false"}});
    tb.log(1, {{"loss", 1.0}});
  }
  CHECK_FALSE(fs::exists(dir / "tensorboard"));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir / "tb-elsewhere")) {
    CHECK(e.path().filename().string().rfind("events.out.tfevents.", 0) == 0);
    CHECK(contains(read_file(e.path()), "brain.Event:2"));
    CHECK_FALSE(contains(read_file(e.path()), "_hparams_"));
    ++files;
  }
  CHECK(files == 1);
}
