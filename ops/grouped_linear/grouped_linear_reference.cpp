#include <loom_ops/grouped_linear.hpp>

namespace loom_ops::reference {

at::Tensor grouped_linear(const at::Tensor& rows, const std::vector<at::Tensor>& weights, const at::Tensor& counts) {
  const at::Tensor on_cpu = counts.cpu();
  std::vector<at::Tensor> out;
  int64_t start = 0;
  for (size_t e = 0; e < weights.size(); ++e) {
    const int64_t n = on_cpu[static_cast<int64_t>(e)].item<int64_t>();
    out.push_back(at::linear(rows.narrow(0, start, n), weights[e]));
    start += n;
  }
  return at::cat(out);
}

}  // namespace loom_ops::reference
