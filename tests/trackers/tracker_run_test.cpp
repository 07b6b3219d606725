// tracker_run_test.cpp: real runs of the host binary with the jsonl, csv and tensorboard
// trackers together: their outputs parse and agree, and after a SIGKILL past the step-20
// checkpoint and a resume, every output's steps strictly increase with no repeats.
#include <doctest/doctest.h>

#include <chrono>
#include <regex>

#include "tracker_outputs.hpp"

using namespace loom_test;

namespace {

// A small, fast, deterministic run in dir/r with the three file trackers.
std::string write_manifest(const fs::path& dir, int steps) {
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\nname = \"r\"\ndir = \"" << dir.string() << "\"\nsteps = " << steps
                      << "\nlog_every = 5\nthreads = 1\npeak_flops = 1e9\n"
                         "[model]\nuse = \"mlp_lm\"\nn_embd = 16\ncontext = 2\nhidden = 32\n"
                         "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\n"
                         "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n"
                         "[schedule]\nuse = \"constant\"\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                         "[[trackers]]\nuse = \"csv\"\n"
                         "[[trackers]]\nuse = \"tensorboard\"\n"
                         "[checkpoint]\nuse = \"safetensors\"\nevery = 10\nkeep = 10\n";
  return path.string();
}

std::vector<int64_t> every_5_up_to(int64_t last) {
  std::vector<int64_t> out;
  for (int64_t s = 5; s <= last; s += 5) out.push_back(s);
  return out;
}

}  // namespace

TEST_CASE("a real run: jsonl, csv and tensorboard parse and agree") {
  const fs::path dir = tmp_dir("trackers-run");
  const Result r = run_host("run " + write_manifest(dir, 30));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const fs::path run = dir / "r";
  CHECK(jsonl_steps(run / "metrics.jsonl") == every_5_up_to(30));
  CHECK(csv_steps(run / "metrics.csv") == every_5_up_to(30));
  // The csv columns are the host's metrics in the order it gives them (jsonl keeps it too).
  const auto first = read_jsonl(run / "metrics.jsonl").at(0);
  std::vector<std::string> keys;
  for (const auto& [k, v] : first.items()) keys.push_back(k);
  CHECK(read_csv(run / "metrics.csv").header == keys);
  for (const char* m : {"loss", "lr", "grad_norm", "tokens_per_s"}) CHECK_MESSAGE(first.contains(m), m);
  check_csv_matches_jsonl(run / "metrics.csv", run / "metrics.jsonl");
  const Result tb = check_tensorboard(run, "--files 1");
  CHECK_MESSAGE(tb.code == 0, tb.err << tb.out);
  MESSAGE(tb.out);
}

TEST_CASE("killed after the step-20 checkpoint and resumed: every tracker's steps strictly increase") {
  const fs::path dir = tmp_dir("trackers-kill");
  const fs::path run = dir / "r";
  const std::string manifest = write_manifest(dir, 40);
  // Saves are slowed down so the run is killed while it trains past step 20 (and logs
  // steps after it) but before the step-30 checkpoint commits.
  const std::string ready = "[ -f " + (run / "checkpoints/step-20/index.json").string() + " ]";
  const std::string script = "LOOM_TEST_SAVE_DELAY_MS=1000 " + std::string(LOOM_HOST_BIN) + " run " + manifest +
                             " & pid=$!; for i in $(seq 1 3000); do " + ready +
                             " && break; kill -0 $pid 2>/dev/null || break; sleep 0.01; done; kill -9 $pid; wait $pid";
  run_shell("sh -c '" + script + "'");
  REQUIRE(fs::exists(run / "checkpoints/step-20/index.json"));
  CHECK_FALSE(fs::exists(run / "checkpoints/step-40"));  // it really died before the end
  const auto before = jsonl_steps(run / "metrics.jsonl");
  REQUIRE(!before.empty());

  const Result resumed = run_host("run " + manifest);
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(resumed.err, m, std::regex("resumed from \\S+ at step (\\d+)")), resumed.err);
  const int64_t at = std::stoll(m[1]);
  CAPTURE(at);
  CHECK(at >= 20);
  CHECK_MESSAGE(before.back() > at, "the killed run logged nothing after its checkpoint; the test proves little");

  const auto jsonl = jsonl_steps(run / "metrics.jsonl");
  const auto csv = csv_steps(run / "metrics.csv");
  CHECK(strictly_increasing(jsonl));
  CHECK(strictly_increasing(csv));
  CHECK(jsonl == every_5_up_to(40));
  CHECK(csv == every_5_up_to(40));
  check_csv_matches_jsonl(run / "metrics.csv", run / "metrics.jsonl");
  // Scalars after TensorBoard's purge equal metrics.jsonl, and a SessionLog START sits at the
  // first step after the checkpoint (which needs the host to call resume()).
  const Result tb = check_tensorboard(run, "--files 2 --resumed-at " + std::to_string(at));
  CHECK_MESSAGE(tb.code == 0, tb.err << tb.out);
  MESSAGE(tb.out);
}

TEST_CASE("console on a terminal: the progress line moves on between log steps, four times a second") {
  const fs::path dir = tmp_dir("trackers-console-tty");
  const fs::path manifest = dir / "m.toml";
  // Logs at steps 1000 and 2000 only: without the ticker the line would be drawn twice.
  std::ofstream(manifest) << "[run]\nname = \"r\"\ndir = \"" << dir.string()
                          << "\"\nsteps = 2000\nlog_every = 1000\nthreads = 1\npeak_flops = 1e9\n"
                             "[model]\nuse = \"mlp_lm\"\nn_embd = 16\ncontext = 2\nhidden = 32\n"
                             "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\n"
                             "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n"
                             "[[trackers]]\nuse = \"console\"\n";
  const auto started = std::chrono::steady_clock::now();
  // script(1) gives the host a pseudo-terminal, so the console draws its live line.
  const Result r = run_shell("script -qfec '" + std::string(LOOM_HOST_BIN) + " run " + manifest.string() + "' /dev/null");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string screen = r.out + r.err;
  if (r.code != 0 && contains(screen, "failed to create pseudo-terminal")) {  // a chroot without /dev/pts
    MESSAGE("no pseudo-terminal here (is /dev/pts mounted?); the live line is not checked: " << screen);
    return;
  }
  REQUIRE_MESSAGE(r.code == 0, screen);
  size_t estimated = 0;
  for (size_t at = screen.find("step ~"); at != std::string::npos; at = screen.find("step ~", at + 1)) ++estimated;
  CHECK(contains(screen, "step 2000/2000"));
  // The second half of the run (after the step-1000 log) alone lasts a good part of a second.
  if (seconds > 2.0) CHECK_MESSAGE(estimated >= 2, screen);
  MESSAGE("run took " << seconds << " s; the ticker drew " << estimated << " estimated lines");
}
