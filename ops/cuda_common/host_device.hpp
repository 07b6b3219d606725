// host_device.hpp: LOOM_OPS_HOST_DEVICE marks the element formulas (each op's *_math.hpp) that
// the CPU loops and the CUDA kernels both run, so that the CPU tests hold the GPU's arithmetic
// to the reference too. Empty where the compiler is not nvcc.
#pragma once

#if defined(__CUDACC__)
#define LOOM_OPS_HOST_DEVICE __host__ __device__
#else
#define LOOM_OPS_HOST_DEVICE
#endif
