// `host launch`: starts the ranks of a data-parallel run on this node without Python. Each
// rank is this same binary with the torchrun variables set; node 0's launcher serves the ranks'
// store (as torchrun's agent does, so the ranks find it with TORCHELASTIC_USE_AGENT_STORE), and
// holds its port from before the ranks start until they end. The launcher forwards SIGINT and
// SIGTERM, and when one rank fails it says which and stops the others. When the launcher itself
// dies (SIGKILL, an OOM kill), the kernel tells every rank, which then ends (base/signals.hpp).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
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

// The rendezvous store of this node's ranks, served by the launcher itself (as torchrun's agent
// serves it) on the named port, or on one the kernel assigns when none is named. The launcher
// holds the listening socket from before the ranks start until they have all ended: a port found
// free and released for rank 0 to bind later could be taken in between, by any process's
// outgoing connection (Gloo's own, of a job beside this one) when it lies in the ephemeral range.
c10::intrusive_ptr<c10d::TCPStore> serve_store(int port, int world) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.numWorkers = static_cast<size_t>(world);
  options.waitWorkers = false;
  try {
    return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    throw runtime_failure("launch: cannot serve the ranks' store on port " + std::to_string(port) + " (" +
                          message.substr(0, message.find('\n')) + "); pass a free --master-port");
  }
}

// A rank's environment, built before fork: between fork and exec the child of a process with
// threads (the store's) may only make async-signal-safe calls, which setenv is not.
std::vector<std::string> rank_environment(const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (std::none_of(set.begin(), set.end(), [&](const auto& kv) { return kv.first == key; })) out.push_back(entry);
  }
  for (const auto& [key, value] : set) out.push_back(key + "=" + value);
  return out;
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
  const int world = o.nnodes * o.nproc_per_node;
  // Node 0's launcher serves the store; the ranks (also rank 0) are its clients.
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (o.node_rank == 0) store = serve_store(o.master_port, world);
  const int port = store ? static_cast<int>(store->getPort()) : o.master_port;
  const std::string exe = boost::dll::program_location().string();

  struct sigaction action{};
  action.sa_handler = &remember_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    const int rank = o.node_rank * o.nproc_per_node + local;
    // TORCHELASTIC_USE_AGENT_STORE on every node: all ranks are the store's clients, and use the
    // same keys (dist_env.hpp attempt_prefix) whether their node serves it or not.
    const std::vector<std::string> environment = rank_environment({{kLauncherPidVariable, std::to_string(launcher)},
                                                                   {"RANK", std::to_string(rank)},
                                                                   {"LOCAL_RANK", std::to_string(local)},
                                                                   {"WORLD_SIZE", std::to_string(world)},
                                                                   {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
                                                                   {"MASTER_ADDR", o.master_addr},
                                                                   {"MASTER_PORT", std::to_string(port)},
                                                                   {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
    std::vector<char*> envp;
    for (const auto& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    std::vector<char*> argv{const_cast<char*>(exe.c_str())};
    for (const auto& a : child_args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string exec_failed = "launch: cannot start " + exe + "\n";
    const pid_t pid = ::fork();
    if (pid < 0) throw runtime_failure(std::string("launch: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);  // the terminal's Ctrl-C reaches the launcher, which forwards it once
      if (!end_with_parent(launcher)) ::_exit(static_cast<int>(ExitCode::runtime));
      ::execve(exe.c_str(), argv.data(), envp.data());
      [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
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
