// Data-parallel training through real processes on Gloo. The synthetic dataset shards global
// sample indices across ranks, so 1 x 8, 2 x 4 and 4 x 2 (with or without accumulation) see
// the same samples per step; token-weighted losses and summed gradients make them agree.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "dist_helpers.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using loom_test::run_shell;

using namespace loom_dist_test;

TEST_CASE("1 x 8, 2 x 4, 4 x 2 and 2 x 2 x accum 2 give the same losses and weights (host launch)") {
  const fs::path dir = loom_test::tmp_dir("dist-equivalence");
  const std::string m = manifest(dir, 20);
  const auto single = run_host("run " + m + " --set run.name=w1 --set data.batch_size=8");
  REQUIRE_MESSAGE(single.code == 0, single.err);
  const auto reference_losses = losses(dir / "w1");
  const auto reference_weights = weights(dir / "w1" / "checkpoints" / "step-20");
  REQUIRE(reference_losses.size() == 20);
  struct Layout {
    const char* name;
    int ranks, batch, accum;
  };
  for (const Layout& l : {Layout{"w2", 2, 4, 1}, Layout{"w4", 4, 2, 1}, Layout{"w2a", 2, 2, 2}}) {
    CAPTURE(l.name);
    const auto r = run_host("launch --nproc-per-node " + std::to_string(l.ranks) + " -- run " + m +
                            " --set run.name=" + l.name + " --set data.batch_size=" + std::to_string(l.batch) +
                            " --set run.grad_accum=" + std::to_string(l.accum));
    REQUIRE_MESSAGE(r.code == 0, r.err);
    check_close(reference_losses, losses(dir / l.name));
    check_close(reference_weights, weights(dir / l.name / "checkpoints" / "step-20"));
    CHECK(fs::exists(dir / l.name / "logs" / "rank-1.log"));
    // Rank 0 speaks on the terminal; other ranks keep their info lines in their log file.
    CHECK_MESSAGE(r.err.find("[rank 1] info:") == std::string::npos, r.err);
    CHECK(r.err.find("[rank 0] info:") != std::string::npos);
    CHECK(loom_test::read_file(dir / l.name / "logs" / "rank-1.log").find("info:") != std::string::npos);
  }
}

TEST_CASE("torchrun --no_python launches the host and matches the single process") {
  // PyTorch's own launcher, from the torch that LOOM_PYTHON runs (tools/dev: .venv's).
  const std::string torchrun = (fs::path(LOOM_PYTHON).parent_path() / "torchrun").string();
  REQUIRE_MESSAGE(fs::exists(torchrun), torchrun << " is missing: LOOM_PYTHON has no torch (tools/dev installs it)");
  const fs::path dir = loom_test::tmp_dir("dist-torchrun");
  const std::string m = manifest(dir, 10);
  REQUIRE(run_host("run " + m + " --set run.name=w1 --set data.batch_size=8").code == 0);
  // A static rendezvous on 127.0.0.1 and a free port: --standalone would use "localhost", which
  // a bare container may not resolve, and a fixed port that parallel tests would share.
  const auto r = run_shell(torchrun + " --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port " +
                           std::to_string(free_port()) + " --redirects 1 --tee 1 --log_dir " +
                           (dir / "torchrun-logs").string() + " --no_python " + std::string(LOOM_HOST_BIN) +
                           " run " + m + " --set run.name=tr --set data.batch_size=4");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  check_close(losses(dir / "w1"), losses(dir / "tr"));
}

TEST_CASE("a rank killed mid-run: the launcher names it, stops the others and exits non-zero") {
  const fs::path dir = loom_test::tmp_dir("dist-fault");
  const std::string m = manifest(dir, 1000000);
  const fs::path err = dir / "launch.err";
  const auto started = std::chrono::steady_clock::now();
  const std::string script = std::string(LOOM_HOST_BIN) + " launch --nproc-per-node 2 -- run " + m +
                             " --set run.name=f --set data.batch_size=4 2>" + err.string() +
                             " & pid=$!; for i in $(seq 1 3000); do [ -f " + (dir / "f" / "metrics.jsonl").string() +
                             " ] && break; sleep 0.01; done; victim=$(sed -n \"s/^launch: rank 1 is pid //p\" " +
                             err.string() + "); kill -9 $victim; wait $pid; echo rc=$? victim=$victim";
  const auto r = run_shell("sh -c '" + script + "'");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(seconds < 60);
  std::smatch match;
  REQUIRE(std::regex_search(r.out, match, std::regex("rc=(\\d+) victim=(\\d+)")));
  CHECK(std::stoi(match[1]) != 0);
  const std::string log = loom_test::read_file(err);
  CHECK(log.find("error: launch: rank 1 (pid " + match[2].str() + ") was killed by signal 9") != std::string::npos);
  // No rank is left behind: every pid the launcher started is gone.
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, match, std::regex("^launch: rank \\d+ is pid (\\d+)")))
      CHECK_MESSAGE(::kill(std::stoi(match[1]), 0) != 0, "pid " << match[1] << " still alive");
}

TEST_CASE("a distributed checkpoint resumes to the uninterrupted run's weights, and at another world size") {
  const fs::path dir = loom_test::tmp_dir("dist-resume");
  const std::string m = manifest(dir, 20);
  const std::string launch = "launch --nproc-per-node 2 -- run " + m + " --set data.batch_size=4";
  REQUIRE(run_host(launch + " --set run.name=whole").code == 0);
  REQUIRE(run_host(launch + " --set run.name=split --set run.steps=10").code == 0);
  const auto resumed = run_host(launch + " --set run.name=split");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  CHECK(resumed.err.find("resumed from") != std::string::npos);
  const auto a = weights(dir / "whole" / "checkpoints" / "step-20");
  const auto b = weights(dir / "split" / "checkpoints" / "step-20");
  for (const auto& [name, t] : a) CHECK_MESSAGE(at::equal(t, b.at(name)), name);  // bit for bit
  // One rank with the same global batch: the synthetic data saved one position for both ranks.
  const auto other = run_host("run " + m + " --set run.name=split --set run.steps=30 --set data.batch_size=8");
  REQUIRE_MESSAGE(other.code == 0, other.err);
  CHECK(other.err.find("world size 2 -> 1") != std::string::npos);
}

TEST_CASE("backend nccl on CPU tensors is refused before any rank trains") {
  const fs::path dir = loom_test::tmp_dir("dist-nccl-cpu");
  const auto r = run_host("launch --nproc-per-node 2 -- run " + manifest(dir, 5) + " --set distributed.backend=nccl");
  CHECK(r.code == 2);
  CHECK((r.err.find("backend nccl moves CUDA tensors") != std::string::npos ||
         r.err.find("built without NCCL") != std::string::npos));
}

TEST_CASE("a rank that never starts: the others fail after timeout_s, naming it") {
  const fs::path dir = loom_test::tmp_dir("dist-missing");
  const auto r = run_host("run " + manifest(dir, 5) + " --set distributed.timeout_s=3",
                          "WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()));
  CHECK(r.code == 1);
  CHECK(r.err.find("rank(s) 1 of 2 did not join within 3 s") != std::string::npos);
}

TEST_CASE("two launches on one node at once each meet on a free port of their own") {
  const fs::path dir = loom_test::tmp_dir("dist-two-jobs");
  const std::string m = manifest(dir, 5);
  const std::string host = LOOM_HOST_BIN;
  const auto job = [&](const std::string& name) {
    return host + " launch --nproc-per-node 2 -- run " + m + " --set run.name=" + name + " > " +
           (dir / (name + ".out")).string() + " 2> " + (dir / (name + ".err")).string();
  };
  const auto r = run_shell("sh -c '(" + job("a") + ") & a=$!; (" + job("b") + ") & b=$!; wait $a; ra=$?; wait $b; "
                           "rb=$?; exit $((ra + rb))'");
  const std::string a = loom_test::read_file(dir / "a.err"), b = loom_test::read_file(dir / "b.err");
  const std::string both = a + b;
  CHECK_MESSAGE(r.code == 0, both);
  const std::regex joined("joined through 127\\.0\\.0\\.1:(\\d+)");
  std::smatch ma, mb;
  REQUIRE(std::regex_search(a, ma, joined));
  REQUIRE(std::regex_search(b, mb, joined));
  CHECK(ma[1].str() != mb[1].str());
  CHECK(ma[1].str() != "29500");
}

TEST_CASE("two launchers as two nodes meet at the store node 0's launcher serves") {
  const fs::path dir = loom_test::tmp_dir("dist-two-nodes");
  const std::string m = manifest(dir, 5);
  REQUIRE(run_host("run " + m + " --set run.name=w1 --set data.batch_size=8").code == 0);
  const std::string port = std::to_string(free_port());
  const auto node = [&](int rank) {
    return std::string(LOOM_HOST_BIN) + " launch --nproc-per-node 1 --nnodes 2 --node-rank " + std::to_string(rank) +
           " --master-addr 127.0.0.1 --master-port " + port + " -- run " + m +
           " --set run.name=n2 --set data.batch_size=4 2> " + (dir / ("node" + std::to_string(rank) + ".err")).string();
  };
  // Node 1 first: its rank waits (up to timeout_s) for the store node 0's launcher opens.
  const auto r = run_shell("sh -c '(" + node(1) + ") & b=$!; sleep 1; " + node(0) + "; ra=$?; wait $b; exit $((ra + $?))'");
  const std::string logs = loom_test::read_file(dir / "node0.err") + loom_test::read_file(dir / "node1.err");
  CHECK_MESSAGE(r.code == 0, logs);
  check_close(losses(dir / "w1"), losses(dir / "n2"));
}

TEST_CASE("a --master-port another process holds is one line naming it, exit 1") {
  const fs::path dir = loom_test::tmp_dir("dist-port-taken");
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const auto r = run_host("launch --nproc-per-node 2 --master-port " + port + " -- run " + manifest(dir, 5));
  ::close(fd);
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.err.find("launch: cannot serve the ranks' store on port " + port) != std::string::npos, r.err);
  CHECK_MESSAGE(r.err.find("launch: rank 0 is pid") == std::string::npos, r.err);  // no rank started
}

TEST_CASE("under torchrun's elastic agent a killed rank's group restarts and resumes to the uninterrupted weights") {
  const std::string torchrun = (fs::path(LOOM_PYTHON).parent_path() / "torchrun").string();
  REQUIRE_MESSAGE(fs::exists(torchrun), torchrun << " is missing: LOOM_PYTHON has no torch (tools/dev installs it)");
  const fs::path dir = loom_test::tmp_dir("dist-elastic");
  const std::string m = manifest(dir, 60);
  const auto whole = run_host("launch --nproc-per-node 2 -- run " + m + " --set run.name=whole --set data.batch_size=4");
  REQUIRE_MESSAGE(whole.code == 0, whole.err);
  // --local-addr: the agent would otherwise publish its host name as the workers' master address,
  // which a machine (or chroot) without that name in /etc/hosts cannot resolve.
  // The agent keeps its store across attempts: the restarted ranks must not read the first
  // attempt's keys (they meet under /worker/attempt_1, as torch.distributed's own ranks do).
  const fs::path err = dir / "torchrun.err";
  const std::string elastic = torchrun + " --nnodes 1 --nproc_per_node 2 --max-restarts 1 --rdzv-backend c10d " +
                              "--rdzv-endpoint 127.0.0.1:" + std::to_string(free_port()) + " --local-addr 127.0.0.1 --no_python " +
                              LOOM_HOST_BIN + " run " + m + " --set run.name=el --set data.batch_size=4";
  const fs::path lock = dir / "el" / "run.lock";
  const auto r = run_shell("sh -c '" + elastic + " 2>" + err.string() + " & agent=$!; for i in $(seq 1 6000); do [ -e " +
                           (dir / "el" / "checkpoints" / "step-20").string() + " ] && break; sleep 0.01; done; " +
                           "kill -9 $(sed -n \"s/.*\\\"pid\\\":\\([0-9]*\\).*/\\1/p\" " + lock.string() +
                           "); wait $agent'");
  const std::string said = loom_test::read_file(err);
  REQUIRE_MESSAGE(r.code == 0, said);
  CHECK_MESSAGE(said.find("after restart 1 by torchrun's elastic agent") != std::string::npos, said);
  check_close(losses(dir / "whole"), losses(dir / "el"));
  const auto a = weights(dir / "whole" / "checkpoints" / "step-60");
  const auto b = weights(dir / "el" / "checkpoints" / "step-60");
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) CHECK_MESSAGE(at::equal(t, b.at(name)), name);  // bit for bit
}

namespace {

// 6 rows a step at any world size: accumulation 2 at 3 ranks, 3 at 2.
const std::string kSixRowsAStep = " --set data.batch_size=1 --set run.global_batch_size=6";

// The shell command of one elastic launcher of a 2:3 job of one rank per node, running
// `run MANIFEST_AND_SETS`, its stderr in dir/NAME.err. A round waits 3 s for a third node once
// two are in: a launcher rejoining after its ranks saved and stopped took over 1 s under the
// suite's load (the round then closed without it).
std::string elastic_node(const fs::path& dir, const std::string& port, const std::string& restarts,
                         const std::string& manifest_and_sets, const std::string& name) {
  return std::string(LOOM_HOST_BIN) + " launch --nproc-per-node 1 --nnodes 2:3 " + restarts + " --rdzv-id " +
         dir.filename().string() + " --rdzv-last-call 3 --rdzv-timeout 60 --master-port " + port + " -- run " +
         manifest_and_sets + kSixRowsAStep + " 2> " + (dir / (name + ".err")).string();
}

}  // namespace

TEST_CASE("host launch --nnodes 2:3: a lost node's launcher and the other two restart at world 2 and finish") {
  const fs::path dir = loom_test::tmp_dir("dist-launch-elastic");
  const std::string m = manifest(dir, 60);
  const std::string port = std::to_string(free_port()), rows = kSixRowsAStep;
  const auto node = [&](const std::string& name) {
    return elastic_node(dir, port, "--max-restarts 1", m + " --set run.name=el", name);
  };
  // a starts first and serves the store; c's launcher is killed once step 20 is saved.
  const auto r = run_shell("sh -c '(" + node("a") + ") & a=$!; sleep 0.5; (" + node("b") + ") & b=$!; " + node("c") +
                           " & c=$!; for i in $(seq 1 6000); do [ -e " + (dir / "el" / "checkpoints" / "step-20").string() +
                           " ] && break; sleep 0.01; done; kill -9 $c; wait $a; ra=$?; wait $b; exit $((ra + $?))'");
  const std::string said = loom_test::read_file(dir / "a.err") + loom_test::read_file(dir / "b.err");
  REQUIRE_MESSAGE(r.code == 0, said);
  CHECK_MESSAGE(said.find("launch: round 1: 2 node(s), world size 2 (was 3)") != std::string::npos, said);
  CHECK_MESSAGE(said.find("launch: restart 1 of 1: ") != std::string::npos, said);
  std::smatch resumed;
  REQUIRE_MESSAGE(std::regex_search(said, resumed,
                                    std::regex(R"(resumed from (\S+/step-\d+) at step \d+ after restart 1 by host launch )"
                                               R"(\(.+\), data-parallel ranks 3 -> 2)")),
                  said);
  // The reference: 2 ranks of one launcher resumed from the same checkpoint, bit for bit.
  const auto ref = run_host("launch --nproc-per-node 2 -- run " + m + " --set run.name=ref" + rows +
                            " --set checkpoint.resume=\"" + resumed[1].str() + "\"");
  REQUIRE_MESSAGE(ref.code == 0, ref.err);
  const auto a = weights(dir / "el" / "checkpoints" / "step-60");
  const auto b = weights(dir / "ref" / "checkpoints" / "step-60");
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) CHECK_MESSAGE(at::equal(t, b.at(name)), name);
}

TEST_CASE("host launch's elastic flags refuse what they cannot mean, exit 2") {
  const fs::path dir = loom_test::tmp_dir("dist-launch-elastic-bad");
  const std::string m = manifest(dir, 5);
  struct Bad {
    const char* flags;
    const char* says;
  };
  for (const Bad& bad : {Bad{"--nnodes 3:2 --master-port 29999", "--nnodes 3:2: MIN is above MAX"},
                         Bad{"--nnodes two", "--nnodes two is not a node count M or a range MIN:MAX"},
                         Bad{"--nnodes 1:2 --node-rank 1 --master-port 29999", "leave --node-rank out"},
                         Bad{"--nnodes 1:2", "every node needs the same --master-port"},
                         Bad{"--max-restarts -1", "need --max-restarts >= 0"}}) {
    CAPTURE(bad.flags);
    const auto r = run_host(std::string("launch --nproc-per-node 1 ") + bad.flags + " -- run " + m);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.err.find(bad.says) != std::string::npos, r.err);
  }
}

TEST_CASE("two elastic jobs sharing one master's store never mix: each trains at its own world size") {
  const fs::path dir = loom_test::tmp_dir("dist-launch-two-jobs");
  const std::string m = manifest(dir, 10);
  const std::string port = std::to_string(free_port());
  const auto launcher = [&](const std::string& job, int nproc, const std::string& nnodes, int steps,
                            const std::string& log) {
    return std::string(LOOM_HOST_BIN) + " launch --nproc-per-node " + std::to_string(nproc) + " --nnodes " + nnodes +
           " --rdzv-id " + job + " --rdzv-last-call 1 --rdzv-timeout 60 --master-port " + port + " -- run " + m +
           " --set run.name=" + job + " --set run.steps=" + std::to_string(steps) + " 2> " + (dir / log).string();
  };
  // Job a's first launcher serves the store and runs longest; job b (3 ranks of one launcher)
  // meets in the same store, under its own id, while job a's two nodes train.
  // The store lives in that launcher: job a's 400 steps outlast job b's 10 (a job whose store's
  // launcher ends first loses it, README "Many machines").
  const auto r = run_shell("sh -c '(" + launcher("a", 1, "2", 400, "a0.err") + ") & a0=$!; sleep 0.5; (" +
                           launcher("a", 1, "2", 400, "a1.err") + ") & a1=$!; " + launcher("b", 3, "1", 10, "b.err") +
                           "; rb=$?; wait $a0; ra0=$?; wait $a1; exit $((rb + ra0 + $?))'");
  const std::string said = loom_test::read_file(dir / "a0.err") + loom_test::read_file(dir / "a1.err") +
                           loom_test::read_file(dir / "b.err");
  REQUIRE_MESSAGE(r.code == 0, said);
  CHECK_MESSAGE(said.find("rank 0 of 2 joined") != std::string::npos, said);
  CHECK_MESSAGE(said.find("rank 0 of 3 joined") != std::string::npos, said);
  CHECK(losses(dir / "a").size() == 400);
  CHECK(losses(dir / "b").size() == 10);
}

TEST_CASE("host launch --nnodes 2:3: a node arriving mid-run is admitted by a restart that uses none of --max-restarts") {
  const fs::path dir = loom_test::tmp_dir("dist-launch-admit");
  const std::string m = manifest(dir, 400);
  const std::string port = std::to_string(free_port());
  const auto node = [&](const std::string& name) {
    return elastic_node(dir, port, "--max-restarts 0", m + " --set run.name=ad", name);
  };
  // a and b start at world 2; c arrives once step 20 is saved and waits in the next round.
  const auto r = run_shell("sh -c '(" + node("a") + ") & a=$!; sleep 0.5; (" + node("b") + ") & b=$!; " +
                           "for i in $(seq 1 6000); do [ -e " + (dir / "ad" / "checkpoints" / "step-20").string() +
                           " ] && break; sleep 0.01; done; " + node("c") +
                           "; rc=$?; wait $a; ra=$?; wait $b; exit $((rc + ra + $?))'");
  const std::string said =
      loom_test::read_file(dir / "a.err") + loom_test::read_file(dir / "b.err") + loom_test::read_file(dir / "c.err");
  REQUIRE_MESSAGE(r.code == 0, said);
  CHECK_MESSAGE(said.find("round 0 closed with 2 nodes before this one arrived") != std::string::npos, said);
  CHECK_MESSAGE(said.find("launch: restarting to admit a node (not counted in --max-restarts): 1 node(s) waiting "
                          "to join (2 running, at most 3)") != std::string::npos,
                said);
  CHECK_MESSAGE(said.find("launch: round 1: 3 node(s), world size 3 (was 2)") != std::string::npos, said);
  // Whichever node rank 0 landed on, the note gives the reason (also the late node's).
  CHECK_MESSAGE(said.find("after restart 1 by host launch (1 node(s) waiting to join (2 running, at most 3)), "
                          "data-parallel ranks 2 -> 3") != std::string::npos,
                said);
  CHECK(losses(dir / "ad").back() > 0);
}
