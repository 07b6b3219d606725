// `host launch`: starts the ranks of a data-parallel run on this node without Python. Each
// rank is this same binary with the torchrun variables set; the launcher forwards SIGINT and
// SIGTERM, and when one rank fails it says which and stops the others. When the launcher itself
// dies (SIGKILL, an OOM kill), the kernel tells every rank, which then ends (base/signals.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/dll/runtime_symbol_info.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "base/failure.hpp"
#include "base/signals.hpp"

namespace loom {
namespace {

volatile std::sig_atomic_t g_forward = 0;
void remember_signal(int signo) { g_forward = signo; }

// A TCP port nobody listens on now, for the rank-0 store.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw runtime_failure(std::string("launch: cannot find a free port: ") + std::strerror(errno) +
                          "; pass --master-port");
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int command_launch(const CommandLine& o) {
  const std::vector<std::string>& child_args = o.child_args;
  if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw usage_failure("launch: need --nproc-per-node >= 1 and 0 <= --node-rank < --nnodes");
  if (child_args.empty() || child_args[0] != "run")
    throw usage_failure("usage: host launch --nproc-per-node N [options] -- run MANIFEST [--set KEY=VALUE]...");
  if (o.nnodes > 1 && o.master_port == 0)
    throw usage_failure("launch: with --nnodes > 1 every node needs the same --master-port");
  const int port = o.master_port ? o.master_port : free_port();
  const int world = o.nnodes * o.nproc_per_node;
  const std::string exe = boost::dll::program_location().string();

  struct sigaction action{};
  action.sa_handler = &remember_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    const int rank = o.node_rank * o.nproc_per_node + local;
    const pid_t pid = ::fork();
    if (pid < 0) throw runtime_failure(std::string("launch: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);  // the terminal's Ctrl-C reaches the launcher, which forwards it once
      if (!end_with_parent(launcher)) ::_exit(static_cast<int>(ExitCode::runtime));
      setenv(kLauncherPidVariable, std::to_string(launcher).c_str(), 1);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
      setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(exe.c_str())};
      for (const auto& a : child_args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      std::fprintf(stderr, "launch: cannot start %s: %s\n", exe.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
    std::fprintf(stderr, "launch: rank %d is pid %d\n", rank, static_cast<int>(pid));
  }

  int exit_code = 0;
  size_t running = pids.size();
  std::chrono::steady_clock::time_point kill_deadline = std::chrono::steady_clock::time_point::max();
  const auto stop_all = [&](int signo) {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, signo);
  };
  while (running > 0) {
    if (g_forward) {
      stop_all(g_forward);
      g_forward = 0;
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != done) continue;
        pids[i] = -1;
        --running;
        const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (failed && exit_code == 0) {
          const int rank = o.node_rank * o.nproc_per_node + static_cast<int>(i);
          std::fprintf(stderr, "error: launch: rank %d (pid %d) %s; stopping the other ranks\n", rank,
                       static_cast<int>(done), describe_exit(status).c_str());
          exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : static_cast<int>(ExitCode::runtime);
          stop_all(SIGTERM);
          kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        } else if (failed && WIFEXITED(status) && WEXITSTATUS(status) == static_cast<int>(ExitCode::usage) &&
                   exit_code == static_cast<int>(ExitCode::runtime)) {
          // Two ranks ended at once: one refused its input, the other lost it as a peer. The
          // refusal is the cause, and its exit code is the one to report.
          exit_code = WEXITSTATUS(status);
        }
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > kill_deadline) {
      stop_all(SIGKILL);  // ranks stuck in a collective with the dead one
      kill_deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code;
}

}  // namespace loom
