#include <loom_ops/packed_attention.hpp>

#include <cmath>

namespace loom_ops::reference {

at::Tensor packed_causal_attention(const at::Tensor& qkv, int64_t n_head, const at::Tensor& mask) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / n_head;
  const std::vector<at::Tensor> parts = qkv.split(C, -1);
  const auto heads = [&](const at::Tensor& t) { return t.view({B, T, n_head, D}).transpose(1, 2); };  // (B, H, T, D)
  const at::Tensor bias = mask.narrow(0, 0, T).narrow(1, 0, T).to(qkv.scalar_type());                // (T, T)
  const at::Tensor scores = at::matmul(heads(parts[0]), heads(parts[1]).transpose(-2, -1)) / std::sqrt(double(D));
  const at::Tensor y = at::matmul(at::softmax(scores + bias, -1), heads(parts[2]));  // (B, H, T, D)
  return y.transpose(1, 2).reshape({B, T, C});
}

}  // namespace loom_ops::reference
