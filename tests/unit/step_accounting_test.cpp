// Issue 34's step accounting on the host side: each step's loss and norm kept on the device
// and read in one copy (step_values.hpp), and MFU's denominator by device and precision
// (peak_flops.hpp), against the datasheet figures the table cites.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "train/peak_flops.hpp"
#include "train/step_values.hpp"

using namespace loom;

TEST_CASE("step values: sums, the newest step and the non-finite count, read once") {
  StepValues values;
  CHECK_FALSE(values.pending());
  const float losses[] = {2.5f, 2.25f, std::numeric_limits<float>::infinity(), 1.75f};
  for (int i = 0; i < 4; ++i) values.add(at::full({}, losses[i]), at::full({}, 0.5 * (i + 1), at::kDouble));
  REQUIRE(values.pending());
  const StepValues::Read read = values.read();
  CHECK(std::isinf(read.loss_sum));
  CHECK(read.nonfinite_steps == 1);
  CHECK(read.last_loss == 1.75);
  CHECK(read.last_grad_norm == 2.0);
  CHECK_FALSE(values.pending());
  // A read starts over; sums of float losses in double are exact whatever the grouping.
  values.add(at::full({}, 0.1f), at::full({}, 1.0f));
  values.add(at::full({}, 0.2f), at::full({}, 1.0f));
  const double expected = static_cast<double>(0.1f) + static_cast<double>(0.2f);
  CHECK(values.read().loss_sum == expected);
}

TEST_CASE("MFU's peak: the datasheet's dense figures by device name and precision") {
  CHECK(datasheet_peak_flops("NVIDIA H100 80GB HBM3", Precision::bf16) == doctest::Approx(989.4e12));
  CHECK(datasheet_peak_flops("NVIDIA H100 80GB HBM3", Precision::tf32) == doctest::Approx(494.7e12));
  CHECK(datasheet_peak_flops("NVIDIA H100 80GB HBM3", Precision::fp32) == doctest::Approx(66.9e12));
  CHECK(datasheet_peak_flops("NVIDIA H100 PCIe", Precision::bf16) == doctest::Approx(756.5e12));
  CHECK(datasheet_peak_flops("NVIDIA H200", Precision::bf16) == doctest::Approx(989.4e12));
  CHECK(datasheet_peak_flops("NVIDIA A100-SXM4-80GB", Precision::bf16) == doctest::Approx(312e12));
  CHECK(datasheet_peak_flops("NVIDIA H100 NVL", Precision::bf16) == 0);  // other clocks: measured
  CHECK(datasheet_peak_flops("NVIDIA GeForce RTX 4090", Precision::bf16) == 0);
  const PeakFlops set = mfu_peak(at::kCPU, "", Precision::fp32, 5e11);
  CHECK(set.flops == 5e11);
  CHECK(set.source == "run.peak_flops");
  const PeakFlops measured = mfu_peak(at::kCPU, "", Precision::fp32, 0);
  CHECK(measured.flops > 1e8);
  CHECK(measured.source == "the fp32 GEMM peak measured now");
}
