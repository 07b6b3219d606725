// signals.hpp: graceful preemption. SIGTERM, SIGINT and SIGUSR1 ask the run to save at the
// next step boundary and exit cleanly (Slurm and Kubernetes send SIGTERM before killing);
// a second SIGINT aborts at once. Ranks started by `host launch` also end with their launcher.
#pragma once

#include <sys/types.h>

#include <csignal>

namespace loom {

class SignalWatch {
 public:
  // Installs the handlers. saves: whether the run saves a checkpoint when it stops on a
  // signal; the message printed on a signal says so either way.
  explicit SignalWatch(bool saves);
  ~SignalWatch();  // restores the previous ones
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // The signal number received so far, or 0.
  static int requested();
};

// Ranks end with the launcher that started them: with no launcher left nobody forwards a stop
// or notices a lost rank, and a scheduler that requeues the job must find the run folder free.
// The launcher asks the kernel, between fork and exec, to send kLauncherGoneSignal to the
// child when the launcher dies (PR_SET_PDEATHSIG), and passes its pid in kLauncherPidVariable.
inline constexpr int kLauncherGoneSignal = SIGHUP;
inline constexpr const char* kLauncherPidVariable = "LOOM_LAUNCHER_PID";

// In the child between fork and exec. False when the launcher is already gone (it may die
// before the request is made, and then no signal would come).
bool end_with_parent(pid_t launcher);

// In a rank: when kLauncherPidVariable is set, a launcher that dies makes this process print
// one line and exit at once with code 1. Checkpoints commit atomically, so nothing saved is
// lost; stopping at once (rather than saving first) frees the run folder for the requeued job.
void stop_with_launcher(int rank);

}  // namespace loom
