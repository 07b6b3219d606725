#include "train/peak_flops.hpp"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>

namespace loom {

double measure_peak_flops(const at::Device& device) {
  at::NoGradGuard no_grad;
  // 1024 on CPU keeps the probe near 0.1 s on two cores; GPUs need larger products to fill up.
  const int64_t n = device.is_cuda() ? 8192 : 1024;
  const auto options = at::TensorOptions().device(device).dtype(at::kFloat);
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

}  // namespace loom
