#include <loom_ops/chunked_loss.hpp>

namespace loom_ops::reference {

at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                int64_t ignore_index) {
  const at::Tensor logits = at::mm(hidden, weight.t());  // (N, V)
  const at::Tensor wide = logits.scalar_type() == at::kDouble ? logits : logits.to(at::kFloat);
  return at::cross_entropy_loss(wide, targets, {}, at::Reduction::Sum, ignore_index);
}

}  // namespace loom_ops::reference
