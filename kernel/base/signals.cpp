#include "base/signals.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>

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

}  // namespace

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
