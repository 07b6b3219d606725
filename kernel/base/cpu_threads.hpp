// cpu_threads.hpp: how the host spends the CPUs it may use. LibTorch runs elementwise ops on
// OpenMP's thread pool (libgomp) and its matrix products in the BLAS, and OpenBLAS built for
// pthreads keeps a second pool of its own. Both pools spin while they wait for work, so with
// two pools on the same cores each steals the cores the other needs: on the 2-core
// development VM a small GPT step took 111 ms with 2 threads against 45 ms with one
// (tools/bench/README.md, "Threads"). The host therefore
//  - prefers OpenBLAS's OpenMP build (Debian's libopenblas0-openmp, found through the host's
//    RPATH), whose matrix products run on LibTorch's own OpenMP pool: one pool, no fight;
//  - where only the pthreads build is there, restarts itself once with OMP_WAIT_POLICY=PASSIVE
//    (OpenMP's workers then sleep instead of spinning; libgomp reads the variable when it is
//    loaded, before main, so only a fresh process image can change it);
//  - sizes both to the CPUs in the process's affinity mask (right under taskset, Slurm and
//    containers), divided among the ranks of one machine;
//  - runs its helper threads (data prefetch, checkpoint writer) single-threaded and at a lower
//    priority, so they fill idle moments instead of taking a core from the step.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

// Call first thing in main, before any other thread exists. When the loaded BLAS and the
// environment's OpenMP wait policy would fight (see above), replaces the process with a fresh
// image of itself under the right policy; returns when nothing needs changing, when the
// restart already happened, when LOOM_THREAD_ENV=keep, or when the restart fails.
void settle_thread_environment(char** argv);

// CPUs this process may run on (its affinity mask); at least 1.
int usable_cpus();

// Sets LibTorch's intra-op threads and the BLAS's threads. requested > 0: that many;
// 0: the usable CPUs divided among local_ranks processes (at least 1). Returns the line that
// `host run` prints: threads, where the number came from, the BLAS and how it shares the cores.
std::string configure_cpu_threads(int64_t requested, int local_ranks);

// Whether helper threads lower their own priority (run.low_priority_helpers); process-wide.
void set_low_priority_helpers(bool low);

// Call at the start of a helper thread (data prefetch, checkpoint writer): its LibTorch ops
// stay on this thread (no parallel region wakes the step's workers), and with a low
// background priority the thread gives way (nice +10) whenever the step wants the core.
void enter_background_thread();

}  // namespace loom
