#include <loom_ops/block_attention.hpp>
#include <loom_ops/packed_attention.hpp>

#include <cmath>

namespace loom_ops::reference {

// The heads split out of qkv, the textbook attention of block_attention's reference, the heads
// merged again.
at::Tensor packed_causal_attention(const at::Tensor& qkv, int64_t n_head, const at::Tensor& mask) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / n_head;
  const std::vector<at::Tensor> parts = qkv.split(C, -1);
  const auto heads = [&](const at::Tensor& t) { return t.view({B, T, n_head, D}).transpose(1, 2); };  // (B, H, T, D)
  const at::Tensor bias = mask.narrow(0, 0, T).narrow(1, 0, T);                                      // (T, T)
  const at::Tensor y = attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), bias, 1.0 / std::sqrt(double(D)));
  return y.to(qkv.scalar_type()).transpose(1, 2).reshape({B, T, C});
}

}  // namespace loom_ops::reference
