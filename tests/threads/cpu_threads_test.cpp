// The host's CPU thread set-up as a user meets it: the default follows the CPUs the process may
// use (taskset), run.threads overrides it, an OpenMP wait policy that would make the pools fight
// is replaced by a restart, and the line `host run` prints says all of it.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/cpu_threads.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::contains;

namespace {

// A two-step quickstart-sized run; threads = -1 leaves run.threads out.
fs::path write_manifest(const fs::path& dir, int threads) {
  const fs::path path = dir / "threads.toml";
  std::ofstream(path) << "[run]\nname = \"t\"\ndir = \"" << (dir / "runs").string() << "\"\nsteps = 2\ndevice = \"cpu\"\n"
                      << (threads >= 0 ? "threads = " + std::to_string(threads) + "\n" : "")
                      << "[model]\nuse = \"gpt\"\nn_layer = 1\nn_embd = 32\nn_head = 2\nseq_len = 16\n"
                      << "[data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 16\n"
                      << "[optimizer]\nuse = \"adamw\"\n[schedule]\nuse = \"constant\"\n";
  return path;
}

// The `threads:` line of a run's log.
std::string threads_line(const std::string& log) {
  const size_t at = log.find("threads: ");
  return at == std::string::npos ? "" : log.substr(at, log.find('\n', at) - at);
}

}  // namespace

TEST_CASE("host run: the default thread count is the CPUs the process may use (taskset)") {
  const fs::path dir = loom_test::tmp_dir("threads-taskset");
  const auto r = loom_test::run_host("run " + write_manifest(dir, -1).string(), "taskset -c 0");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const std::string line = threads_line(r.err);
  INFO(line);
  CHECK(contains(line, "threads: 1 for LibTorch ops and the BLAS (the 1 CPU this process may use)"));
  CHECK(contains(line, "helper threads at low priority"));
}

TEST_CASE("host run: run.threads overrides the default and says so") {
  const fs::path dir = loom_test::tmp_dir("threads-explicit");
  const auto r = loom_test::run_host("run " + write_manifest(dir, 3).string(), "taskset -c 0");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const std::string line = threads_line(r.err);
  INFO(line);
  CHECK(contains(line, "threads: 3 for LibTorch ops and the BLAS (run.threads; 1 CPU this process may use: "
                       "more threads than CPUs wait for each other's cores)"));
}

TEST_CASE("host run: on the OpenMP OpenBLAS an exported OMP_WAIT_POLICY is removed by a restart") {
  if (loom::usable_cpus() < 2) {
    MESSAGE("skipped: one CPU, so no second worker and nothing to settle");
    return;
  }
  const fs::path dir = loom_test::tmp_dir("threads-policy");
  const auto r = loom_test::run_host("run " + write_manifest(dir, -1).string(), "OMP_WAIT_POLICY=passive");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const std::string line = threads_line(r.err);
  INFO(line);
  if (!contains(line, "OpenMP build")) {
    MESSAGE("skipped: the host did not load the OpenMP OpenBLAS (libopenblas0-openmp not installed): " << line);
    return;
  }
  CHECK(contains(line, "matrix products share LibTorch's OpenMP pool"));
  CHECK(contains(line, "the host restarted itself and removed OMP_WAIT_POLICY=passive"));
  // LOOM_THREAD_ENV=keep: the user's environment stays, and no restart is reported.
  const auto kept = loom_test::run_host("run " + write_manifest(dir, -1).string(),
                                        "OMP_WAIT_POLICY=passive LOOM_THREAD_ENV=keep");
  REQUIRE_MESSAGE(kept.code == 0, kept.err);
  CHECK_FALSE(contains(threads_line(kept.err), "restarted"));
}

TEST_CASE("thread set-up on the pthreads OpenBLAS: OpenMP's workers are made to sleep") {
  const auto r = loom_test::run_shell(std::string("env -u OMP_WAIT_POLICY -u LOOM_THREAD_ENV_SETTLED ") + LOOM_THREAD_PROBE);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  INFO(r.out);
  if (!contains(r.out, "pthreads build") || loom::usable_cpus() < 2) {
    MESSAGE("skipped: the system BLAS is not the pthreads OpenBLAS, or one CPU: " << r.out);
    return;
  }
  CHECK(contains(r.out, "OMP_WAIT_POLICY=PASSIVE\n"));
  CHECK(contains(r.out, "the host restarted itself and set OMP_WAIT_POLICY=PASSIVE"));
  CHECK(contains(r.out, "OpenMP workers sleep between ops"));
  CHECK(contains(r.out, "install libopenblas0-openmp"));
}
