// One writer per run folder (README "The run folder"): ranks end with the launcher that started
// them, a second run on a live folder is refused before it touches a file, and the lock of a
// killed run does not outlive it. Real processes throughout: the launcher is SIGKILLed as a job
// scheduler or the OOM killer would. The second half (issue 48) does to run.lock what operators
// do: hard-linked copies, `rm run.lock` under a live run, a lock taken by another process or
// user, and `host eval` racing the live run's checkpoint rotation.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "cli/lock_holders.hpp"  // process_alive
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
  while (std::chrono::steady_clock::now() < deadline && (loom::process_alive(ranks[0]) || loom::process_alive(ranks[1])))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int pid : ranks) CHECK_MESSAGE(!loom::process_alive(pid), "rank pid " << pid << " outlived its launcher by 5 s");
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
  const std::string holder = "is in use by a live run: pid " + std::to_string(first_ranks[0]) + " (";
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

// ---- what operators do to the lock file (issue 48) -------------------------------------------

namespace {

// A finished short run in dir/name; returns its manifest.
std::string finished_run(const fs::path& dir, const std::string& name, int steps = 20) {
  const std::string m = manifest(dir, steps);
  const auto r = run_host("run " + m + " --set data.batch_size=8 --set run.name=" + name);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return m;
}

// Every regular file under root with its bytes.
std::map<std::string, std::string> contents_under(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const std::string& f : files_under(root)) out[f] = read_file(root / f);
  return out;
}

int pid_in(const std::string& text, const std::string& key) {
  std::smatch match;
  REQUIRE_MESSAGE(std::regex_search(text, match, std::regex(key + "=(\\d+)")), text);
  return std::stoi(match[1]);
}

}  // namespace

TEST_CASE("a run.lock shared through a hard link (cp -al) is refused before either folder is touched") {
  const fs::path dir = loom_test::tmp_dir("lock-hard-link");
  const std::string m = finished_run(dir, "a");
  REQUIRE(run_shell("cp -al " + (dir / "a").string() + " " + (dir / "b").string()).code == 0);
  const auto a_before = contents_under(dir / "a");
  const auto b_before = contents_under(dir / "b");
  const auto r = run_host("run " + m + " --set data.batch_size=8 --set run.name=b --set run.steps=40");
  CHECK(r.code == 2);
  CHECK_MESSAGE((contains(r.err, "has 2 hard links") && contains(r.err, "cp -al")), r.err);
  CHECK_MESSAGE(loom_test::line_count(r.err) == 1, r.err);
  CHECK(contents_under(dir / "a") == a_before);
  CHECK(contents_under(dir / "b") == b_before);
  // What the message says to do: the copy gets a lock file of its own, and the original stays as it was.
  fs::remove(dir / "b" / "run.lock");
  const auto again = run_host("run " + m + " --set data.batch_size=8 --set run.name=b --set run.steps=40");
  CHECK_MESSAGE(again.code == 0, again.err);
  CHECK(read_file(dir / "a" / "run.lock") == a_before.at("run.lock"));
  for (const auto& [name, bytes] : a_before)
    if (name.rfind("checkpoints/", 0) == 0) CHECK_MESSAGE(read_file(dir / "a" / name) == bytes, name);
  CHECK(fs::hard_link_count(dir / "b" / "run.lock") == 1);
}

TEST_CASE("rm run.lock under a live run: a second run is refused, and the live run keeps the folder and finishes") {
  const fs::path dir = loom_test::tmp_dir("lock-deleted");
  const std::string m = manifest(dir, kSteps);
  const std::string run = std::string(LOOM_HOST_BIN) + " run " + m + " --set data.batch_size=8 --set run.name=r";
  const fs::path lock = dir / "r" / "run.lock";
  // The first run is paused while its lock file is deleted and a second run tries, so the second
  // finds the deleted file still held (the harder case: the first has not taken the name back yet).
  const auto r = run_shell("sh -c '" + run + " 2>" + (dir / "first.err").string() + " & pid=$!; " +
                           wait_for(dir / "r" / "metrics.jsonl") + "kill -STOP $pid; rm " + lock.string() + "; " +
                           run + " 2>" + (dir / "second.err").string() + "; echo second=$?; kill -CONT $pid; " +
                           // and once more after the first took a new file: an ordinary refusal
                           "sleep 0.5; " + run + " 2>" + (dir / "third.err").string() + "; echo third=$?; " +
                           "wait $pid; echo first=$? pid=$pid'");
  INFO(r.out);
  const int first = pid_in(r.out, "pid");
  CHECK(contains(r.out, "first=0"));
  CHECK(contains(r.out, "second=2"));
  CHECK(contains(r.out, "third=2"));
  const std::string second = read_file(dir / "second.err");
  CHECK_MESSAGE((contains(second, "pid " + std::to_string(first) + " (") && contains(second, "still holds the run.lock that was deleted")), second);
  CHECK_MESSAGE(loom_test::line_count(second) == 1, second);
  const std::string third = read_file(dir / "third.err");
  CHECK_MESSAGE(contains(third, "is in use by a live run: pid " + std::to_string(first)), third);
  CHECK_MESSAGE(contains(read_file(dir / "first.err"), "was deleted or replaced while this run held it"), read_file(dir / "first.err"));
  // The live run's outputs are complete and its own: every step logged once, finished, no debris.
  const auto logged = logged_losses(dir / "r");
  REQUIRE(logged.size() == static_cast<size_t>(kSteps));
  for (size_t i = 0; i < logged.size(); ++i) CHECK(logged[i].first == static_cast<int64_t>(i + 1));
  CHECK(nlohmann::json::parse(read_file(dir / "r" / "status.json")).at("status") == "finished");
  for (const auto& entry : fs::directory_iterator(dir / "r" / "checkpoints"))
    CHECK_MESSAGE(entry.path().extension().empty(), entry.path().string());
  CHECK(nlohmann::json::parse(read_file(lock)).at("pid").get<int>() == first);
  CHECK((fs::status(lock).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
}

TEST_CASE("a live run whose lock file another process took stops at once and writes nothing more") {
  const fs::path dir = loom_test::tmp_dir("lock-lost");
  const std::string m = manifest(dir, kSteps);
  const std::string run = std::string(LOOM_HOST_BIN) + " run " + m + " --set data.batch_size=8 --set run.name=r";
  const fs::path lock = dir / "r" / "run.lock";
  const fs::path metrics = dir / "r" / "metrics.jsonl";
  // Paused, its lock file replaced by one that flock(1) holds for 10 s (it touches `held` once
  // it holds it: a loaded machine may start it late), then resumed.
  const fs::path held = dir / "held";
  const auto r = run_shell("sh -c '" + run + " 2>" + (dir / "first.err").string() + " & pid=$!; " + wait_for(metrics) +
                           "kill -STOP $pid; rm " + lock.string() + "; flock -n " + lock.string() + " sh -c \"touch " +
                           held.string() + "; sleep 10\" & holder=$!; " + wait_for(held) + "wc -l < " +
                           metrics.string() + " > " + (dir / "lines").string() +
                           "; ls " + (dir / "r" / "checkpoints").string() + " > " + (dir / "saved").string() +
                           "; kill -CONT $pid; wait $pid; echo first=$? holder=$holder; kill $holder'");
  INFO(r.out);
  const int holder = pid_in(r.out, "holder");
  CHECK(contains(r.out, "first=1"));
  const std::string err = read_file(dir / "first.err");
  CHECK_MESSAGE(contains(err, "was deleted or replaced while this run held it, and pid " + std::to_string(holder)), err);
  CHECK_MESSAGE(contains(err, "writes nothing more"), err);
  // Nothing after the pause but the step the pause may have caught between its check and its
  // log line (every check-then-write has that window): at most that one line, no checkpoint,
  // and the status left as it was.
  const size_t before_pause = std::stoul(read_file(dir / "lines"));
  CHECK(loom_test::line_count(read_file(metrics)) <= before_pause + 1);
  std::istringstream listed(read_file(dir / "saved"));
  std::set<std::string> before, after;
  for (std::string line; std::getline(listed, line);) before.insert(line);
  for (const auto& entry : fs::directory_iterator(dir / "r" / "checkpoints")) after.insert(entry.path().filename().string());
  CHECK(after == before);
  CHECK(nlohmann::json::parse(read_file(dir / "r" / "status.json")).at("status") == "running");
}

TEST_CASE("a refusal names the process that holds the lock, not the pid an earlier run wrote") {
  const fs::path dir = loom_test::tmp_dir("lock-holder");
  const std::string m = finished_run(dir, "h");
  const fs::path lock = dir / "h" / "run.lock";
  const int earlier = nlohmann::json::parse(read_file(lock)).at("pid").get<int>();
  const auto r = run_shell("sh -c 'flock -n " + lock.string() + " sleep 10 & holder=$!; sleep 0.3; " +
                           std::string(LOOM_HOST_BIN) + " run " + m + " --set data.batch_size=8 --set run.name=h 2>" +
                           (dir / "err").string() + "; echo rc=$? holder=$holder; kill $holder'");
  INFO(r.out);
  CHECK(contains(r.out, "rc=2"));
  const std::string err = read_file(dir / "err");
  CHECK_MESSAGE(contains(err, "is in use by a live run: pid " + std::to_string(pid_in(r.out, "holder")) + " ("), err);
  CHECK_MESSAGE(contains(err, "the file names pid " + std::to_string(earlier) + ", an earlier holder"), err);
}

TEST_CASE("another user can neither open a run's lock file nor lend it one of theirs") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to act as another user (setpriv)");
    return;
  }
  const fs::path dir = loom_test::tmp_dir("lock-other-user");
  const std::string m = finished_run(dir, "u");
  const fs::path lock = dir / "u" / "run.lock";
  fs::permissions(dir, fs::perms::all);  // let the other user reach the folder; the file's own mode decides
  fs::permissions(dir / "u", fs::perms::all);
  const std::string nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  // Loom's file is 0600: the other user cannot open it to lock it.
  CHECK(run_shell(nobody + "flock -n -s " + lock.string() + " true").code != 0);
  // A lock file that the other user owns (and holds) is refused, naming its owner.
  fs::remove(lock);
  const auto r = run_shell("sh -c '" + nobody + "sh -c \"umask 022; exec flock -n " + lock.string() +
                           " sleep 10\" & holder=$!; sleep 0.5; " + std::string(LOOM_HOST_BIN) + " run " + m +
                           " --set data.batch_size=8 --set run.name=u 2>" + (dir / "err").string() +
                           "; echo rc=$?; kill $holder'");
  CHECK(contains(r.out, "rc=2"));
  const std::string err = read_file(dir / "err");
  CHECK_MESSAGE((contains(err, "belongs to user ") && contains(err, "refusing the run folder's lock file")), err);
}

TEST_CASE("host eval that loses its checkpoint to the live run's rotation evaluates the newest one") {
  const fs::path dir = loom_test::tmp_dir("lock-eval-rotation");
  const std::string m = manifest(dir, 4000);
  std::ofstream(m, std::ios::app) << "[eval_data]\nuse = \"synthetic\"\nseq_len = 16\nbatch_size = 4\nmax_batches = 2\n";
  const std::string host = LOOM_HOST_BIN;
  // keep = 1: each save deletes the one before; eval waits 300 ms between choosing and reading.
  const auto r = run_shell("sh -c '" + host + " run " + m + " --set data.batch_size=8 --set run.name=r " +
                           "--set checkpoint.every=5 --set checkpoint.keep=1 2>/dev/null & pid=$!; " +
                           wait_for(dir / "r" / "metrics.jsonl") + "sleep 0.2; LOOM_TEST_EVAL_READ_DELAY_MS=300 " + host + " eval " + m +
                           " --set run.name=r --json >" + (dir / "eval.json").string() + " 2>" + (dir / "eval.err").string() +
                           "; echo eval=$?; kill $pid; wait $pid'");
  INFO(r.out);
  const std::string err = read_file(dir / "eval.err");
  CHECK_MESSAGE(contains(r.out, "eval=0"), err);
  CHECK_MESSAGE(contains(err, "was removed while being read (a live run deletes checkpoints past [checkpoint] keep); the newest is step-"), err);
  const auto result = nlohmann::json::parse(read_file(dir / "eval.json"));
  CHECK(result.at("step").get<int64_t>() > 5);
  CHECK(std::isfinite(result.at("metrics").at("eval_loss").get<double>()));

  // A checkpoint named on the command line is reported as removed, not as damaged.
  // The run is paused until eval has checked the checkpoint it was given and waits to read it.
  const fs::path s_checkpoints = dir / "s" / "checkpoints";
  const fs::path named_log = dir / "named.err";
  const auto named = run_shell("sh -c '" + host + " run " + m + " --set data.batch_size=8 --set run.name=s " +
                               "--set checkpoint.every=5 --set checkpoint.keep=1 2>/dev/null & pid=$!; " +
                               wait_for(dir / "s" / "metrics.jsonl") + "sleep 0.2; kill -STOP $pid; c=$(ls " +
                               s_checkpoints.string() + " | grep -E \"^step-[0-9]+$\" | sort -t- -k2 -n | tail -n 1); " +
                               "echo chosen=$c; LOOM_TEST_EVAL_READ_DELAY_MS=1000 " + host + " eval " + m +
                               " --set run.name=s --checkpoint " + s_checkpoints.string() + "/$c 2>" + named_log.string() +
                               " & eval=$!; for i in $(seq 1 3000); do grep -q LOOM_TEST_EVAL_READ_DELAY_MS " +
                               named_log.string() + " 2>/dev/null && break; sleep 0.01; done; kill -CONT $pid; " +
                               "wait $eval; echo eval=$?; kill $pid; wait $pid'");
  INFO(named.out);
  const std::string named_err = read_file(dir / "named.err");
  std::smatch chosen;
  REQUIRE(std::regex_search(named.out, chosen, std::regex("chosen=(step-\\d+)")));
  CHECK_MESSAGE(contains(named.out, "eval=1"), named_err);
  CHECK_MESSAGE(contains(named_err, std::string(chosen[1]) + " was removed while being read"), named_err);
  CHECK_MESSAGE(named_err.find("error:") == named_err.rfind("error:"), named_err);  // one error line
}
