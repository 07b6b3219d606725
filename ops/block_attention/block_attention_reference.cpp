#include <loom_ops/block_attention.hpp>

namespace loom_ops::reference {

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                     double scale) {
  const int64_t H = q.size(1);
  const at::ScalarType wide = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto repeat = [&](const at::Tensor& x) { return x.size(1) == H ? x : x.repeat_interleave(H / x.size(1), 1); };
  at::Tensor scores = at::matmul(q.to(wide), repeat(k).to(wide).transpose(-2, -1)) * scale;
  if (bias.defined()) scores = scores + bias.to(wide);
  return at::matmul(at::softmax(scores, -1), repeat(v).to(wide));
}

}  // namespace loom_ops::reference
