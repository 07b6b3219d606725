// vector_exp.hpp: what lets a CPU element loop call glibc's vector exp (libmvec, part of libc6:
// expf for 4 floats at a time with SSE2, 8 with AVX2). Include it before anything that calls
// expf in the loop, in a file compiled with -fno-math-errno (ops/CMakeLists.txt).
#pragma once

#include <cmath>

// glibc's own header announces the vector expf only under -ffast-math, whose approximate
// division turns exp's overflow to infinity into NaN. This declaration announces it without it.
#if defined(__GLIBC__) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
extern "C" float expf(float) noexcept __attribute__((simd("notinbranch")));
#endif

// One clone of a loop per instruction set, picked when the library loads (GCC ifunc): AVX2
// where the CPU has it, SSE2 everywhere else.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LOOM_OPS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOOM_OPS_CPU_CLONES
#endif
