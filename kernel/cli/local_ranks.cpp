#include "cli/local_ranks.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/failure.hpp"
#include "base/signals.hpp"

namespace loom {
namespace {

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

LocalRanks::LocalRanks(const std::vector<std::string>& child_args, const RankStart& start) : start_(start) {
  const std::string exe = boost::dll::program_location().string();
  const pid_t launcher = ::getpid();
  for (int local = 0; local < start.nproc_per_node; ++local) {
    const int rank = start.node_rank * start.nproc_per_node + local;
    // TORCHELASTIC_USE_AGENT_STORE on every node: all ranks are the store's clients, and use the
    // same keys (dist_env.hpp attempt_prefix) whether their node serves it or not.
    std::vector<std::pair<std::string, std::string>> set{{kLauncherPidVariable, std::to_string(launcher)},
                                                         {"RANK", std::to_string(rank)},
                                                         {"LOCAL_RANK", std::to_string(local)},
                                                         {"WORLD_SIZE", std::to_string(start.world)},
                                                         {"LOCAL_WORLD_SIZE", std::to_string(start.nproc_per_node)},
                                                         {"MASTER_ADDR", start.master_addr},
                                                         {"MASTER_PORT", std::to_string(start.master_port)},
                                                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
    set.insert(set.end(), start.more_environment.begin(), start.more_environment.end());
    const std::vector<std::string> environment = rank_environment(set);
    std::vector<char*> envp;
    for (const auto& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    std::vector<char*> argv{const_cast<char*>(exe.c_str())};
    for (const auto& a : child_args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string exec_failed = "launch: cannot start " + exe + "\n";
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);  // before stop() sets errno anew
      stop(std::chrono::seconds(10));
      throw runtime_failure("launch: fork failed: " + why);
    }
    if (pid == 0) {
      ::setpgid(0, 0);  // the terminal's Ctrl-C reaches the launcher, which forwards it once
      if (!end_with_parent(launcher)) ::_exit(static_cast<int>(ExitCode::runtime));
      ::execve(exe.c_str(), argv.data(), envp.data());
      [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
      ::_exit(127);
    }
    pids_.push_back(pid);
    ++running_;
    std::fprintf(stderr, "launch: rank %d is pid %d\n", rank, static_cast<int>(pid));
  }
}

void LocalRanks::poll() {
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done <= 0) break;
    const auto it = std::find(pids_.begin(), pids_.end(), done);
    if (it == pids_.end()) continue;
    *it = -1;
    --running_;
    const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (failed && exit_code_ == 0) {
      const int rank = start_.node_rank * start_.nproc_per_node + static_cast<int>(it - pids_.begin());
      failure_ = "rank " + std::to_string(rank) + " (pid " + std::to_string(done) + ") " + describe_exit(status);
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : static_cast<int>(ExitCode::runtime);
      stop_later(std::chrono::seconds(10));
    } else if (failed && WIFEXITED(status) && WEXITSTATUS(status) == static_cast<int>(ExitCode::usage) &&
               exit_code_ == static_cast<int>(ExitCode::runtime)) {
      // Two ranks ended at once: one refused its input, the other lost it as a peer. The
      // refusal is the cause, and its exit code is the one to report.
      exit_code_ = WEXITSTATUS(status);
    }
  }
  if (running_ > 0 && std::chrono::steady_clock::now() > kill_at_) {
    signal_all(SIGKILL);
    kill_at_ = std::chrono::steady_clock::time_point::max();
  }
}

void LocalRanks::signal_all(int signo) {
  for (pid_t p : pids_)
    if (p > 0) ::kill(p, signo);
}

void LocalRanks::stop_later(std::chrono::seconds grace) {
  signal_all(SIGTERM);
  kill_at_ = std::min(kill_at_, std::chrono::steady_clock::now() + grace);
}

void LocalRanks::stop(std::chrono::seconds grace) {
  stop_later(grace);
  while (running()) {
    poll();
    ::usleep(20000);
  }
}

}  // namespace loom
