// peak_flops.hpp: the denominator of MFU (model FLOPs utilization), for the precision the run
// computes in. On a GPU the table holds the datasheet's dense peak of the devices it knows
// (MFU as PaLM and llm.c report it); elsewhere, and for devices it does not know, the rate
// of a square matrix product in that precision measured now, so MFU says how much of the
// attainable GEMM speed the step uses. run.peak_flops overrides both.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "train/precision.hpp"

namespace loom {

struct PeakFlops {
  double flops = 0;    // FLOP/s
  std::string source;  // for the log: "dense bf16 peak of NVIDIA H100 80GB HBM3 (datasheet)"
};

// The datasheet's dense peak of the named CUDA device for precision, or 0 when the table does
// not know the device.
double datasheet_peak_flops(const std::string& device_name, Precision precision);

// FLOP/s of a square matrix product in dtype on device (TF32 as the run set it), best of a
// few timed repetitions.
double measure_peak_flops(const at::Device& device, at::ScalarType dtype = at::kFloat);

// configured: run.peak_flops (0: not set). device_name: the CUDA device's, or "" on the CPU.
PeakFlops mfu_peak(const at::Device& device, const std::string& device_name, Precision precision, double configured);

}  // namespace loom
