// signals.hpp: graceful preemption. SIGTERM, SIGINT and SIGUSR1 ask the run to save at the
// next step boundary and exit cleanly (Slurm and Kubernetes send SIGTERM before killing);
// a second SIGINT aborts at once.
#pragma once

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

}  // namespace loom
