// peak_flops.hpp: the denominator of MFU (model FLOPs utilization). Measured, not looked up:
// the fp32 matrix-product rate this process reaches on this device right now, so MFU says
// how much of the attainable GEMM speed the training step uses.
#pragma once

#include <ATen/ATen.h>

namespace loom {

// FLOP/s of a square fp32 matrix product on device, best of a few timed repetitions.
double measure_peak_flops(const at::Device& device);

}  // namespace loom
