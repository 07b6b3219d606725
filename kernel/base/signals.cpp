#include "base/signals.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace loom {
namespace {

volatile std::sig_atomic_t g_requested = 0;
volatile std::sig_atomic_t g_saves = 1;  // whether the run saves a checkpoint when it stops
struct sigaction g_previous[3];
const int kSignals[3] = {SIGTERM, SIGINT, SIGUSR1};

void on_signal(int signo) {
  if (signo == SIGINT && g_requested == SIGINT) {  // second Ctrl-C: stop waiting
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_requested = signo;
  // Only async-signal-safe calls here: write(2) with a fixed text.
  static const char kSaving[] =
      "\nloom: signal received; saving at the next step boundary, then exiting (Ctrl-C again aborts)\n";
  static const char kNotSaving[] =
      "\nloom: signal received; stopping at the next step boundary; nothing is saved: the manifest has no "
      "[checkpoint] table (add one to save on signals) (Ctrl-C again aborts)\n";
  ssize_t ignored = g_saves ? write(STDERR_FILENO, kSaving, sizeof(kSaving) - 1)
                            : write(STDERR_FILENO, kNotSaving, sizeof(kNotSaving) - 1);
  (void)ignored;
}

volatile pid_t g_launcher = 0;
char g_launcher_gone[256];  // the line printed on the way out, written before the handler is set
size_t g_launcher_gone_length = 0;

void say_launcher_gone_and_exit() {
  ssize_t ignored = write(STDERR_FILENO, g_launcher_gone, g_launcher_gone_length);
  (void)ignored;
  ::_exit(1);
}

void on_launcher_gone(int signo) {
  // A launcher with threads (its store's) dies thread by thread: the kernel signals when the
  // thread that forked this rank ends, and getppid() may name the launcher's other, dying threads
  // for a moment more. Wait for the reparenting (nanosleep is async-signal-safe).
  for (int i = 0; i < 100 && ::getppid() == g_launcher; ++i) {
    struct timespec pause{0, 10 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  }
  if (::getppid() == g_launcher) {  // not from the kernel: a SIGHUP with its usual meaning
    std::signal(signo, SIG_DFL);
    std::raise(signo);
    return;
  }
  say_launcher_gone_and_exit();
}

}  // namespace

bool end_with_parent(pid_t launcher) {
  return ::prctl(PR_SET_PDEATHSIG, kLauncherGoneSignal) == 0 && ::getppid() == launcher;
}

void stop_with_launcher(int rank) {
  const char* text = std::getenv(kLauncherPidVariable);
  if (text == nullptr) return;
  const long pid = std::strtol(text, nullptr, 10);
  ::unsetenv(kLauncherPidVariable);  // not for processes this rank may start
  if (pid <= 1) return;
  g_launcher = static_cast<pid_t>(pid);
  const int n = std::snprintf(g_launcher_gone, sizeof g_launcher_gone,
                              "[rank %d] error: the launcher (pid %ld) is gone; this rank stops now. Checkpoints "
                              "are whole: the same command again resumes from the newest\n",
                              rank, pid);
  g_launcher_gone_length = n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof g_launcher_gone - 1);
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = &on_launcher_gone;
  sigemptyset(&action.sa_mask);
  sigaction(kLauncherGoneSignal, &action, nullptr);
  if (::getppid() != g_launcher) say_launcher_gone_and_exit();  // gone before the handler was set
}

SignalWatch::SignalWatch(bool saves) {
  g_requested = 0;
  g_saves = saves ? 1 : 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = &on_signal;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

SignalWatch::~SignalWatch() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int SignalWatch::requested() { return g_requested; }

}  // namespace loom
