// One writer per run folder (README "The run folder"): ranks end with the launcher that started
// them, a second run on a live folder is refused before it touches a file, and the lock of a
// killed run does not outlive it. Real processes throughout: the launcher is SIGKILLed as a job
// scheduler or the OOM killer would.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "dist_helpers.hpp"

namespace fs = std::filesystem;
using loom_test::contains;
using loom_test::read_file;
using loom_test::run_host;
using loom_test::run_shell;
using namespace loom_dist_test;

namespace {

// Long enough that a run is still going when the shell below acts on it (a step of this MLP
// takes about a millisecond; each checkpoint more).
constexpr int kSteps = 1500;

// Whether pid names a live process. An orphan's zombie waits for whoever adopted it to reap
// it, which a container's first process may never do; a zombie has stopped all the same.
bool alive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

std::vector<int> rank_pids(const std::string& launcher_err) {
  std::vector<int> pids;
  std::istringstream lines(launcher_err);
  std::smatch match;
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, match, std::regex("^launch: rank \\d+ is pid (\\d+)"))) pids.push_back(std::stoi(match[1]));
  return pids;
}

// A shell loop that waits (up to 30 s) until path exists.
std::string wait_for(const fs::path& path) {
  return "for i in $(seq 1 3000); do [ -e " + path.string() + " ] && break; sleep 0.01; done; ";
}

std::set<std::string> files_under(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file()) out.insert(fs::relative(entry.path(), root).string());
  return out;
}

// The losses, step by step, that a run's metrics.jsonl holds (the timings differ between runs).
std::vector<std::pair<int64_t, double>> logged_losses(const fs::path& run) {
  std::vector<std::pair<int64_t, double>> out;
  std::istringstream in(read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    out.emplace_back(j.at("step").get<int64_t>(), j.at("loss").get<double>());
  }
  return out;
}

}  // namespace

TEST_CASE("the launcher killed with SIGKILL takes its ranks along, and the same command again resumes exactly") {
  const fs::path dir = loom_test::tmp_dir("lock-launcher-killed");
  const std::string m = manifest(dir, kSteps);
  const std::string host = LOOM_HOST_BIN;
  const std::string launch = "launch --nproc-per-node 2 -- run " + m + " --set data.batch_size=4";
  const auto whole = run_host(launch + " --set run.name=whole");
  REQUIRE_MESSAGE(whole.code == 0, whole.err);

  const fs::path err = dir / "killed.err";
  const auto killed = run_shell("sh -c '" + host + " " + launch + " --set run.name=cut 2>" + err.string() +
                                " & pid=$!; " + wait_for(dir / "cut" / "checkpoints" / "step-20") +
                                "kill -9 $pid; wait $pid; echo launcher=$pid'");
  std::smatch match;
  REQUIRE(std::regex_search(killed.out, match, std::regex("launcher=(\\d+)")));
  const std::string launcher = match[1];
  const std::vector<int> ranks = rank_pids(read_file(err));
  REQUIRE(ranks.size() == 2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline && (alive(ranks[0]) || alive(ranks[1])))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int pid : ranks) CHECK_MESSAGE(!alive(pid), "rank pid " << pid << " outlived its launcher by 5 s");
  const std::string said = read_file(err);
  CHECK_MESSAGE(contains(said, "[rank 0] error: the launcher (pid " + launcher + ") is gone"), said);
  CHECK_MESSAGE(contains(said, "[rank 1] error: the launcher (pid " + launcher + ") is gone"), said);
  REQUIRE_MESSAGE(!fs::exists(dir / "cut" / "checkpoints" / ("step-" + std::to_string(kSteps))),
                  "the run ended before its launcher was killed; raise kSteps");

  // The scheduler's requeue: the same command, on the folder the dead job left.
  const auto again = run_host(launch + " --set run.name=cut");
  REQUIRE_MESSAGE(again.code == 0, again.err);
  CHECK(contains(again.err, "resumed from"));
  const std::string last = "step-" + std::to_string(kSteps);
  const auto a = weights(dir / "whole" / "checkpoints" / last);
  const auto b = weights(dir / "cut" / "checkpoints" / last);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) CHECK_MESSAGE(at::equal(t, b.at(name)), name);  // bit for bit
}

TEST_CASE("a second run or launch on a live run folder is refused, and the live run's files are a run alone's") {
  const fs::path dir = loom_test::tmp_dir("lock-live-folder");
  const std::string m = manifest(dir, kSteps);
  const std::string host = LOOM_HOST_BIN;
  const std::string launch = "launch --nproc-per-node 2 -- run " + m + " --set data.batch_size=4 --set run.name=r";
  const auto alone = run_host(launch);
  REQUIRE_MESSAGE(alone.code == 0, alone.err);
  fs::rename(dir / "r", dir / "alone");

  const std::string second_run = host + " run " + m + " --set data.batch_size=8 --set run.name=r";
  const auto r = run_shell("sh -c '" + host + " " + launch + " 2>" + (dir / "first.err").string() + " & pid=$!; " +
                           wait_for(dir / "r" / "metrics.jsonl") + second_run + " 2>" +
                           (dir / "second-run.err").string() + "; echo run=$?; " + host + " " + launch + " 2>" +
                           (dir / "second-launch.err").string() + "; echo launch=$?; " +
                           "[ -e " + (dir / "r" / "checkpoints" / ("step-" + std::to_string(kSteps))).string() +
                           " ] && echo late; wait $pid; echo first=$?'");
  INFO(r.out);
  REQUIRE_MESSAGE(!contains(r.out, "late"), "the first run ended before the second was tried; raise kSteps");
  CHECK(contains(r.out, "first=0"));
  CHECK(contains(r.out, "run=2"));
  CHECK(contains(r.out, "launch=2"));
  const std::vector<int> first_ranks = rank_pids(read_file(dir / "first.err"));
  REQUIRE(first_ranks.size() == 2);
  const std::string holder = "is in use by a live run: pid " + std::to_string(first_ranks[0]) + " on host ";
  const std::string refused_run = read_file(dir / "second-run.err");
  const std::string refused_launch = read_file(dir / "second-launch.err");
  CHECK_MESSAGE(contains(refused_run, holder), refused_run);
  CHECK_MESSAGE(contains(refused_launch, holder), refused_launch);
  CHECK_MESSAGE(contains(refused_launch, "error: launch: rank 0 (pid "), refused_launch);
  CHECK_MESSAGE(loom_test::line_count(refused_run) == 1, refused_run);  // the one line that says why

  // Nothing of the refused attempts is in the folder: the same files as the run alone, the same
  // manifest, every tensor of every checkpoint bit for bit (their metadata holds the elapsed
  // time), the same losses, each rank's log joined once.
  const fs::path live = dir / "r";
  CHECK(files_under(live) == files_under(dir / "alone"));
  CHECK(read_file(live / "manifest.toml") == read_file(dir / "alone" / "manifest.toml"));
  for (const auto& step : fs::directory_iterator(dir / "alone" / "checkpoints")) {
    const auto a = checkpoint_tensors(step.path());
    const auto b = checkpoint_tensors(live / "checkpoints" / step.path().filename());
    REQUIRE(a.size() == b.size());
    for (const auto& [name, t] : a) CHECK_MESSAGE(at::equal(t, b.at(name)), step.path().filename().string() << " " << name);
  }
  CHECK(logged_losses(live) == logged_losses(dir / "alone"));
  for (const char* log : {"logs/rank-0.log", "logs/rank-1.log"}) {
    const std::string text = read_file(live / log);
    CHECK_MESSAGE(text.find("joined through") == text.rfind("joined through"), log);
    CHECK_MESSAGE(!contains(text, "in use by a live run"), log);
  }
  // A rank keeps in memory what it logs before it may write, then puts it first in its file.
  CHECK(read_file(live / "logs/rank-1.log").rfind("[rank 1] info: run r: ", 0) == 0);
  CHECK(nlohmann::json::parse(read_file(live / "status.json")).at("status") == "finished");
}

TEST_CASE("the lock of a run killed with SIGKILL does not block the next run") {
  const fs::path dir = loom_test::tmp_dir("lock-stale");
  const std::string m = manifest(dir, kSteps);
  const std::string run = std::string(LOOM_HOST_BIN) + " run " + m + " --set data.batch_size=8 --set run.name=s";
  const auto killed = run_shell("sh -c '" + run + " & pid=$!; " + wait_for(dir / "s" / "metrics.jsonl") +
                                "kill -9 $pid; wait $pid; echo killed=$pid'");
  std::smatch match;
  REQUIRE(std::regex_search(killed.out, match, std::regex("killed=(\\d+)")));
  // The lock file stays behind and names the dead process; the lock itself died with it.
  const auto holder = nlohmann::json::parse(read_file(dir / "s" / "run.lock"));
  CHECK(holder.at("pid").get<int>() == std::stoi(match[1]));
  const auto next = run_host("run " + m + " --set data.batch_size=8 --set run.name=s");
  CHECK_MESSAGE(next.code == 0, next.err);
  CHECK(nlohmann::json::parse(read_file(dir / "s" / "status.json")).at("status") == "finished");
}
