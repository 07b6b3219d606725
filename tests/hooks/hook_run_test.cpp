// The built-in hooks through the real host binary on a small, fast, deterministic run:
// the profiler writes a Chrome trace of exactly the configured steps, memory_monitor writes
// memory.jsonl (and keeps it strictly increasing across a resume), early_stop ends a run
// gracefully (exit 0, final checkpoint) and resumes its count from the checkpoint, and eval
// puts eval_loss into the trackers at the expected steps.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;

namespace {

// A run of `steps` steps in dir/r with the given extra TOML (hooks, [eval_data], ...).
std::string write_manifest(const fs::path& dir, int steps, int log_every, const std::string& extra) {
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\nname = \"r\"\ndir = \"" << dir.string() << "\"\nsteps = " << steps
                      << "\nlog_every = " << log_every
                      << "\nthreads = 1\npeak_flops = 1e9\n"
                         "[model]\nuse = \"mlp_lm\"\nn_embd = 16\ncontext = 2\nhidden = 32\n"
                         "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\n"
                         "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n"
                         "[schedule]\nuse = \"constant\"\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                      << extra;
  return path.string();
}

const std::string kCheckpoint = "[checkpoint]\nuse = \"safetensors\"\nevery = 4\nkeep = 100\nasync = false\n";

std::vector<nlohmann::json> json_lines(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(loom_test::read_file(file));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The steps of the records in metrics.jsonl that carry `key`.
std::vector<int64_t> steps_with(const fs::path& run, const std::string& key) {
  std::vector<int64_t> out;
  for (const auto& r : json_lines(run / "metrics.jsonl"))
    if (r.contains(key)) out.push_back(r.at("step").get<int64_t>());
  return out;
}

// The trace's events: LibTorch writes a top-level array; the Chrome format also allows
// {"traceEvents": [...]}.
nlohmann::json trace_events(const fs::path& file) {
  const nlohmann::json trace = nlohmann::json::parse(loom_test::read_file(file));
  if (trace.is_object()) return trace.at("traceEvents");
  return trace;
}

// Profiles steps [a, b] of an 8-step run with `recorder`; returns the number of matrix products
// in the trace.
int profiled_matmuls(const std::string& name, int a, int b, const std::string& recorder = "auto") {
  const fs::path dir = loom_test::tmp_dir("hooks-profiler-" + name);
  const std::string hook = "[[hooks]]\nuse = \"profiler\"\nstart_step = " + std::to_string(a) +
                           "\nend_step = " + std::to_string(b) + "\nrecorder = \"" + recorder + "\"\n";
  const auto r = run_host("run " + write_manifest(dir, 8, 4, hook));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const fs::path trace = dir / "r" / "trace.json";
  REQUIRE(fs::exists(trace));
  CHECK_FALSE(fs::exists(dir / "r" / "trace.json.tmp"));
  const std::string steps = a == b ? "step " + std::to_string(a) : "steps " + std::to_string(a) + "-" + std::to_string(b);
  CHECK_MESSAGE(loom_test::contains(r.err, "wrote the trace of " + steps + " to " + trace.string()), r.err);
  const nlohmann::json events = trace_events(trace);
  REQUIRE(events.is_array());
  CHECK(events.size() > 10);
  int matmuls = 0;
  for (const auto& e : events) {
    // Kineto also writes metadata ("M") and flow events; ops are complete events ("X"), which
    // Chrome and Perfetto place on a timeline, and its ops are "cpu_op"s.
    if (recorder == "kineto" && (e.value("ph", "") != "X" || e.value("cat", "") != "cpu_op")) continue;
    REQUIRE(e.at("name").is_string());
    CHECK(e.at("ph") == "X");
    CHECK(e.at("ts").is_number());
    CHECK(e.at("dur").is_number());
    const std::string op = e.at("name");
    matmuls += op == "aten::addmm" || op == "aten::mm";
  }
  return matmuls;
}

}  // namespace

TEST_CASE("profiler writes a Chrome trace JSON of exactly the configured steps") {
  const int one = profiled_matmuls("one", 3, 3);
  CHECK(one > 0);  // mlp_lm's linear layers: aten::addmm forward, aten::mm backward
  // Every step does the same products, so the count scales with the number of steps profiled.
  CHECK(profiled_matmuls("two", 3, 4) == 2 * one);
  CHECK(profiled_matmuls("four", 5, 8) == 4 * one);
  // Kineto (the GPU's default, which also records kernels there) sees the same ops on the CPU.
  CHECK(profiled_matmuls("kineto", 3, 4, "kineto") == 2 * one);
}

TEST_CASE("profiler: an unknown recorder is refused by name") {
  const fs::path dir = loom_test::tmp_dir("hooks-profiler-recorder");
  const auto r = run_host("run " + write_manifest(dir, 4, 2, "[[hooks]]\nuse = \"profiler\"\nrecorder = \"nsys\"\n"));
  CHECK(r.code != 0);
  CHECK_MESSAGE(loom_test::contains(r.err, "profiler: recorder must be \"auto\", \"kineto\" or \"legacy\", got \"nsys\""),
                r.err);
}

TEST_CASE("profiler: a run that ends inside the window writes what it recorded") {
  const fs::path dir = loom_test::tmp_dir("hooks-profiler-short");
  const std::string hook = "[[hooks]]\nuse = \"profiler\"\nstart_step = 3\nend_step = 10\npath = \"prof/steps.json\"\n";
  const auto r = run_host("run " + write_manifest(dir, 4, 2, hook));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const fs::path trace = dir / "r" / "prof" / "steps.json";
  CHECK_MESSAGE(loom_test::contains(r.err, "wrote the trace of steps 3-4 to " + trace.string()), r.err);
  CHECK(trace_events(trace).size() > 10);
}

TEST_CASE("profiler: a window beyond the run warns and writes nothing") {
  const fs::path dir = loom_test::tmp_dir("hooks-profiler-beyond");
  const auto r = run_host("run " + write_manifest(dir, 4, 2, "[[hooks]]\nuse = \"profiler\"\n"));  // steps 5-10
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(loom_test::contains(r.err, "start_step 5 lies beyond run.steps = 4"));
  CHECK_FALSE(fs::exists(dir / "r" / "trace.json"));
}

TEST_CASE("memory_monitor logs and writes memory.jsonl every N steps and at the end") {
  const fs::path dir = loom_test::tmp_dir("hooks-memory");
  const auto r = run_host("run " + write_manifest(dir, 10, 5, "[[hooks]]\nuse = \"memory_monitor\"\nevery = 3\n"));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto lines = json_lines(dir / "r" / "memory.jsonl");
  std::vector<int64_t> steps;
  for (const auto& l : lines) {
    steps.push_back(l.at("step"));
    CHECK(l.at("rank") == 0);
    CHECK(l.at("rss_bytes").get<int64_t>() > 1000000);  // the host with LibTorch loaded: megabytes
    CHECK(l.at("peak_rss_bytes").get<int64_t>() >= l.at("rss_bytes").get<int64_t>());
    CHECK_FALSE(l.contains("cuda_allocated_bytes"));  // a CPU run
  }
  CHECK(steps == std::vector<int64_t>{3, 6, 9, 10});
  CHECK_MESSAGE(loom_test::contains(r.err, "step 3: rss "), r.err);
  CHECK(loom_test::contains(r.err, "MiB (peak "));
}

TEST_CASE("memory_monitor: a resumed run drops the interrupted run's later lines, so steps never repeat") {
  const fs::path dir = loom_test::tmp_dir("hooks-memory-resume");
  const std::string manifest =
      write_manifest(dir, 10, 5, "[[hooks]]\nuse = \"memory_monitor\"\nevery = 3\n" + kCheckpoint);
  REQUIRE(run_host("run " + manifest).code == 0);
  // As if the run had died after step 9: the newest checkpoint is step 8.
  fs::remove_all(dir / "r" / "checkpoints" / "step-10");
  const auto r = run_host("run " + manifest);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(loom_test::contains(r.err, "at step 8"));
  std::vector<int64_t> steps;
  for (const auto& l : json_lines(dir / "r" / "memory.jsonl")) steps.push_back(l.at("step"));
  CHECK(steps == std::vector<int64_t>{3, 6, 9, 10});
}

TEST_CASE("early_stop on the training loss (LOG events) ends the run gracefully") {
  const fs::path dir = loom_test::tmp_dir("hooks-early-stop-loss");
  // mode "max" on a falling loss: the first logged value stays the best. min_delta makes that
  // certain, so the stop lands exactly on the third logged step (6).
  const std::string hook =
      "[[hooks]]\nuse = \"early_stop\"\nmetric = \"loss\"\nmode = \"max\"\npatience = 2\nmin_delta = 1e6\n";
  const auto r = run_host("run " + write_manifest(dir, 40, 2, hook + kCheckpoint));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK_MESSAGE(loom_test::contains(r.err, "loss has not improved for 2 observations"), r.err);
  CHECK(loom_test::contains(r.err, "stopping after step 6"));
  CHECK(steps_with(dir / "r", "loss") == std::vector<int64_t>{2, 4, 6});
  CHECK(fs::exists(dir / "r" / "checkpoints" / "step-6" / "index.json"));  // the final checkpoint
  CHECK_FALSE(fs::exists(dir / "r" / "checkpoints" / "step-8"));
}

TEST_CASE("early_stop on a falling training loss with mode max and no margin stops early too") {
  const fs::path dir = loom_test::tmp_dir("hooks-early-stop-falling");
  const std::string hook = "[[hooks]]\nuse = \"early_stop\"\nmetric = \"loss\"\nmode = \"max\"\npatience = 3\n";
  const auto r = run_host("run " + write_manifest(dir, 100, 2, hook));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto steps = steps_with(dir / "r", "loss");
  REQUIRE_FALSE(steps.empty());
  CHECK(steps.back() < 100);
  CHECK(loom_test::contains(r.err, "stopping after step " + std::to_string(steps.back())));
}

TEST_CASE("early_stop's count survives a checkpoint: the resumed run stops where an uninterrupted one would") {
  const std::string hook =
      "[[hooks]]\nuse = \"early_stop\"\nmetric = \"loss\"\nmode = \"max\"\npatience = 3\nmin_delta = 1e6\n";
  // Uninterrupted: observations at 2 (best), 4, 6, 8 -> stop after step 8.
  const fs::path whole = loom_test::tmp_dir("hooks-early-stop-whole");
  const auto w = run_host("run " + write_manifest(whole, 40, 2, hook + kCheckpoint));
  REQUIRE_MESSAGE(w.code == 0, w.err);
  CHECK(steps_with(whole / "r", "loss").back() == 8);
  // Interrupted after step 4 (checkpoint at 4 holds best = step 2's loss, one stale), resumed.
  const fs::path parts = loom_test::tmp_dir("hooks-early-stop-resume");
  const std::string manifest = write_manifest(parts, 40, 2, hook + kCheckpoint);
  REQUIRE(run_host("run " + manifest + " --set run.steps=4").code == 0);
  const auto r = run_host("run " + manifest);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(loom_test::contains(r.err, "at step 4"));
  CHECK_MESSAGE(loom_test::contains(r.err, "stopping after step 8"), r.err);
}

// The two cases below need the host's evaluation support ([eval_data], request_eval, EVAL_END).

TEST_CASE("eval puts eval_loss and eval_ppl into the trackers at the expected steps") {
  const fs::path dir = loom_test::tmp_dir("hooks-eval");
  const std::string extra =
      "[eval_data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\nmax_batches = 2\n"
      "[[hooks]]\nuse = \"eval\"\nevery = 4\n";
  const auto r = run_host("run " + write_manifest(dir, 10, 5, extra));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(steps_with(dir / "r", "eval_loss") == std::vector<int64_t>{4, 8, 10});  // every 4, and at the end
  for (const auto& rec : json_lines(dir / "r" / "metrics.jsonl")) {
    if (!rec.contains("eval_loss")) continue;
    const double loss = rec.at("eval_loss"), ppl = rec.at("eval_ppl");
    CHECK(std::isfinite(loss));
    CHECK(loss > 0);
    CHECK(ppl == doctest::Approx(std::exp(loss)).epsilon(1e-6));
  }
}

TEST_CASE("early_stop on eval_loss that cannot improve stops the run early with exit 0") {
  const fs::path dir = loom_test::tmp_dir("hooks-early-stop-eval");
  // mode "max" on a falling eval loss, patience 1: the second evaluation (step 4) stops the run.
  const std::string extra =
      "[eval_data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\nmax_batches = 2\n"
      "[[hooks]]\nuse = \"eval\"\nevery = 2\n"
      "[[hooks]]\nuse = \"early_stop\"\nmetric = \"eval_loss\"\nmode = \"max\"\npatience = 1\n" +
      kCheckpoint;
  const auto r = run_host("run " + write_manifest(dir, 40, 2, extra));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK_MESSAGE(loom_test::contains(r.err, "eval_loss has not improved for 1 observation"), r.err);
  CHECK(loom_test::contains(r.err, "stopping after step 4"));
  CHECK(steps_with(dir / "r", "eval_loss") == std::vector<int64_t>{2, 4});
  CHECK(steps_with(dir / "r", "loss").back() == 4);
  CHECK(fs::exists(dir / "r" / "checkpoints" / "step-4" / "index.json"));
}
