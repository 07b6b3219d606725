// thread_probe: the kernel's thread set-up in a program without the host's RPATH, so it runs
// on the system's BLAS (Debian's default, the pthreads OpenBLAS). Prints the line `host run`
// would print and the OpenMP wait policy it ended with. Used by cpu_threads_test.cpp.
#include <cstdio>
#include <cstdlib>

#include "base/cpu_threads.hpp"

int main(int, char** argv) {
  loom::settle_thread_environment(argv);
  std::printf("%s\n", loom::configure_cpu_threads(0, 1).c_str());
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("OMP_WAIT_POLICY=%s\n", policy ? policy : "(unset)");
  return 0;
}
