#include "train/peak_flops.hpp"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>

namespace loom {

double datasheet_peak_flops(const std::string& name, Precision precision) {
  // Dense (no structured sparsity) tensor-core peaks, TFLOP/s: bf16, tf32, fp32 (no tensor
  // cores). NVIDIA H100 datasheet (SXM5 989.4 / 494.7 / 66.9; PCIe 756.5 / 378 / 51.2), H200
  // datasheet (SXM: the H100 SXM's), A100 datasheet (312 / 156 / 19.5, SXM and PCIe alike).
  // NVL boards run at other clocks and are measured instead.
  struct Row {
    double bf16, tf32, fp32;
  };
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  Row row{0, 0, 0};
  if (has("NVL")) return 0;
  if (has("H100") && (has("PCIe") || has("PCIE"))) row = {756.5, 378.0, 51.2};
  else if (has("H100") || has("H200")) row = {989.4, 494.7, 66.9};
  else if (has("A100")) row = {312.0, 156.0, 19.5};
  const double tflops = precision == Precision::bf16 ? row.bf16 : precision == Precision::tf32 ? row.tf32 : row.fp32;
  return tflops * 1e12;
}

double measure_peak_flops(const at::Device& device, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  // 1024 on CPU keeps the probe near 0.1 s on two cores; GPUs need larger products to fill up.
  const int64_t n = device.is_cuda() ? 8192 : 1024;
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  const auto sync = [&] {
    if (device.is_cuda()) c.sum().item<float>();  // waits for the queued products
  };
  at::mm_out(c, a, b);  // warm-up: thread pools, allocator, kernel selection
  sync();
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const int inner = device.is_cuda() ? 10 : 2;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) at::mm_out(c, a, b);
    sync();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, inner * 2.0 * n * n * n / seconds);
  }
  return best;
}

PeakFlops mfu_peak(const at::Device& device, const std::string& device_name, Precision precision, double configured) {
  const std::string kind = precision_name(precision);
  if (configured > 0) return {configured, "run.peak_flops"};
  if (device.is_cuda()) {
    if (const double peak = datasheet_peak_flops(device_name, precision); peak > 0)
      return {peak, "the dense " + kind + " peak of " + device_name + " (datasheet)"};
  }
  const at::ScalarType dtype = precision == Precision::bf16 ? at::kBFloat16 : at::kFloat;
  return {measure_peak_flops(device, dtype),
          "the " + kind + " GEMM peak measured now" + (device.is_cuda() ? " on " + device_name : "")};
}

}  // namespace loom
