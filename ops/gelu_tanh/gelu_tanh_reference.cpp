#include <loom_ops/gelu_tanh.hpp>

namespace loom_ops::reference {

at::Tensor gelu_tanh(const at::Tensor& x) { return at::gelu(x, "tanh"); }

}  // namespace loom_ops::reference
