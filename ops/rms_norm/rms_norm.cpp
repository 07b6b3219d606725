#include <loom_ops/check_args.hpp>
#include <loom_ops/rms_norm.hpp>

#include <string>

namespace loom_ops {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  check_arg(w.dim() == 1 && x.dim() >= 1 && x.size(-1) == w.size(0), "rms_norm",
            [&] { return "w must be (D) with D = x.size(-1) (" + std::to_string(x.dim() ? x.size(-1) : 0) + ")"; });
  const at::Tensor x32 = x.to(at::kFloat);
  return (x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps)).to(x.scalar_type()) * w;
}

}  // namespace loom_ops
