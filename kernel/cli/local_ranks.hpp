// local_ranks.hpp: the ranks `host launch` starts on its node, each this same binary with the
// torchrun variables set, and what became of them. The first rank to fail is kept as one line
// for the launcher to print, the others get SIGTERM, and SIGKILL 10 s later (ranks stuck in a
// collective with the dead one). Each rank ends with the launcher (base/signals.hpp
// end_with_parent).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace loom {

struct RankStart {
  int node_rank = 0, nproc_per_node = 1, world = 1;
  std::string master_addr;
  int master_port = 0;
  std::vector<std::pair<std::string, std::string>> more_environment;  // the restart's, for one
};

class LocalRanks {
 public:
  // Forks and execs the ranks; throws a runtime Failure when fork fails.
  LocalRanks(const std::vector<std::string>& child_args, const RankStart& start);

  // Reaps the ranks that ended, never blocking. The first failure stops the others.
  void poll();
  bool running() const { return running_ > 0; }
  // The first failure's line ("rank 3 (pid 812) exited with code 1"); "" while none failed.
  const std::string& failure() const { return failure_; }
  // The exit code the launcher reports: the first failure's, or a refusal's (exit 2) over a
  // peer's lost connection when both ended at once; 0 while none failed.
  int exit_code() const { return exit_code_; }

  // Sends `signo` to every rank still running.
  void signal_all(int signo);
  // SIGTERM now and SIGKILL after `grace`, then waits until every rank ended.
  void stop(std::chrono::seconds grace);

 private:
  void stop_later(std::chrono::seconds grace);
  RankStart start_;
  std::vector<pid_t> pids_;
  size_t running_ = 0;
  std::string failure_;
  int exit_code_ = 0;
  std::chrono::steady_clock::time_point kill_at_ = std::chrono::steady_clock::time_point::max();
};

}  // namespace loom
