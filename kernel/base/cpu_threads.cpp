#include "base/cpu_threads.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

namespace loom {
namespace {

// How the BLAS that LibTorch's matrix products go to runs its threads. OpenBLAS says so itself
// (openblas_get_parallel: 0 sequential, 1 its own pthreads, 2 OpenMP); another BLAS (MKL in the
// PyTorch wheels, named as such) is reported as unknown and left to OpenMP's settings.
enum class BlasThreads { unknown, sequential, own_pthreads, openmp };

struct Blas {
  BlasThreads threads = BlasThreads::unknown;
  std::string name = "a BLAS other than OpenBLAS";
};

// Looked up in the process's global scope: the BLAS came in as a dependency of LibTorch.
template <typename Fn>
Fn global_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

Blas loaded_blas() {
  Blas blas;
  const auto get_parallel = global_symbol<int (*)()>("openblas_get_parallel");
  if (!get_parallel) {
    if (at::hasMKL()) blas.name = "MKL inside LibTorch";  // the PyTorch wheels link it in
    return blas;
  }
  const int mode = get_parallel();
  blas.threads = mode == 2 ? BlasThreads::openmp : mode == 1 ? BlasThreads::own_pthreads : BlasThreads::sequential;
  blas.name = "OpenBLAS";
  if (const auto get_config = global_symbol<char* (*)()>("openblas_get_config")) {
    const std::string config = get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64"
    const size_t version_end = config.find(' ', config.find(' ') + 1);
    blas.name = config.substr(0, version_end);
  }
  return blas;
}

bool equals_ignoring_case(const char* a, const char* b) { return a && b && strcasecmp(a, b) == 0; }

std::atomic<bool> background_low{true};

}  // namespace

void settle_thread_environment(char** argv) {
  if (equals_ignoring_case(std::getenv("LOOM_THREAD_ENV"), "keep") || std::getenv("LOOM_THREAD_ENV_SETTLED")) return;
  if (usable_cpus() < 2) return;  // one thread: no second worker to spin
  const Blas blas = loaded_blas();
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::string change;  // what the restart changes, for the line configure_cpu_threads prints
  if (blas.threads == BlasThreads::own_pthreads) {  // two pools: OpenMP's must sleep while OpenBLAS works
    if (equals_ignoring_case(policy, "passive")) return;
    change = "set OMP_WAIT_POLICY=PASSIVE";
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  } else if (blas.threads == BlasThreads::openmp) {  // one pool: waking sleeping workers would only add latency
    if (!policy) return;
    change = std::string("removed OMP_WAIT_POLICY=") + policy;
    unsetenv("OMP_WAIT_POLICY");
  } else {
    return;
  }
  setenv("LOOM_THREAD_ENV_SETTLED", change.c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on as we are
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return std::max(1, CPU_COUNT(&set));
}

std::string configure_cpu_threads(int64_t requested, int local_ranks) {
  const int cpus = usable_cpus();
  const int ranks = std::max(1, local_ranks);
  const int threads = requested > 0 ? static_cast<int>(requested) : std::max(1, cpus / ranks);
  at::set_num_threads(threads);
  // OpenBLAS keeps its own count, fixed at load time from OPENBLAS_NUM_THREADS or the CPUs
  // online (its OpenMP build stays at 1 if that variable said 1), so it is set here as well.
  if (const auto set_blas_threads = global_symbol<void (*)(int)>("openblas_set_num_threads")) set_blas_threads(threads);

  std::string line = "threads: " + std::to_string(threads) + " for LibTorch ops and the BLAS (";
  const std::string cpus_text = std::to_string(cpus) + (cpus == 1 ? " CPU" : " CPUs") + " this process may use";
  if (requested > 0) {
    line += "run.threads; " + cpus_text + (threads > cpus ? ": more threads than CPUs wait for each other's cores" : "");
  } else {
    line += ranks > 1 ? cpus_text + ", shared by " + std::to_string(ranks) + " ranks on this machine" : "the " + cpus_text;
  }
  line += "); ";
  const Blas blas = loaded_blas();
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  switch (blas.threads) {
    case BlasThreads::openmp:
      line += blas.name + ", OpenMP build: matrix products share LibTorch's OpenMP pool";
      break;
    case BlasThreads::own_pthreads:
      line += blas.name + ", pthreads build: a second pool beside LibTorch's";
      if (threads > 1)
        line += std::string("; OpenMP workers ") + (equals_ignoring_case(policy, "passive") ? "sleep" : "SPIN") +
                " between ops (OMP_WAIT_POLICY); install libopenblas0-openmp for one shared pool, faster";
      break;
    case BlasThreads::sequential:
      line += blas.name + ", sequential build: matrix products run on one thread";
      break;
    case BlasThreads::unknown:
      line += blas.name + ", threads set through OpenMP";
      break;
  }
  if (const char* change = std::getenv("LOOM_THREAD_ENV_SETTLED"))
    line += std::string("; the host restarted itself and ") + change + " (LOOM_THREAD_ENV=keep keeps the environment)";
  line += "; prefetch and checkpoint writing on helper threads at ";
  line += background_low ? "low priority" : "normal priority";
  return line;
}

void set_low_priority_helpers(bool low) { background_low = low; }

void enter_background_thread() {
  // LibTorch gives every thread the run's thread count at its first parallel op; take that
  // first, then keep this thread's own ops serial.
  at::internal::lazy_init_num_threads();
  if (const auto set_omp_threads = global_symbol<void (*)(int)>("omp_set_num_threads")) set_omp_threads(1);
  if (!background_low) return;
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));  // on Linux a nice value belongs to one thread
  errno = 0;
  const int nice_now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(19, nice_now + 10));
}

}  // namespace loom
