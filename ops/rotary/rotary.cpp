#include <loom_ops/check_args.hpp>
#include <loom_ops/rotary.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace loom_ops {

at::Tensor yarn_inv_freq(const at::Tensor& inv_freq, int64_t head_dim, double theta, const RopeScaling& s) {
  const double D = static_cast<double>(head_dim);
  const auto dim_of = [&](double rotations) {
    return D * std::log(s.original_max_positions / (rotations * 2.0 * M_PI)) / (2.0 * std::log(theta));
  };
  double low = dim_of(s.beta_fast), high = dim_of(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, D - 1.0);
  if (low == high) high += 0.001;  // as transformers: no division by zero
  const at::Tensor ramp = ((at::arange(head_dim / 2, inv_freq.options()) - low) / (high - low)).clamp(0.0, 1.0);
  const at::Tensor kept = 1.0 - ramp;  // the extrapolated share of each dimension
  return inv_freq / s.factor * (1.0 - kept) + inv_freq * kept;
}

at::Tensor rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor exponents = at::arange(0, head_dim, 2, f64) / static_cast<double>(head_dim);  // (D/2)
  at::Tensor inv_freq = at::pow(theta, -exponents);                                                // (D/2)
  if (scaling.type == RopeScaling::Type::linear) return inv_freq / scaling.factor;
  if (scaling.type == RopeScaling::Type::yarn) return yarn_inv_freq(inv_freq, head_dim, theta, scaling);
  if (scaling.type != RopeScaling::Type::llama3) return inv_freq;
  const double low_wavelen = scaling.original_max_positions / scaling.low_freq_factor;
  const double high_wavelen = scaling.original_max_positions / scaling.high_freq_factor;
  const at::Tensor wavelen = 2.0 * M_PI / inv_freq;
  const at::Tensor smooth = (scaling.original_max_positions / wavelen - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
  const at::Tensor blended = (1.0 - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
  return at::where(wavelen < high_wavelen, inv_freq, at::where(wavelen > low_wavelen, inv_freq / scaling.factor, blended));
}

Rope::Rope(int64_t block_size, int64_t head_dim, double theta, const at::Device& device, const RopeScaling& scaling) {
  check_arg(head_dim > 0 && head_dim % 2 == 0, "Rope",
            [&] { return "head_dim must be even and positive, got " + std::to_string(head_dim); });
  const at::Tensor inv_freq = rope_inv_freq(head_dim, theta, scaling);                                           // (D/2)
  const at::Tensor angles = at::outer(at::arange(block_size, at::TensorOptions().dtype(at::kDouble)), inv_freq);  // (T, D/2)
  const at::Tensor both = at::cat({angles, angles}, -1);                                                         // (T, D)
  cos = (both.cos() * scaling.attention_factor).to(at::kFloat).to(device);
  sin = (both.sin() * scaling.attention_factor).to(at::kFloat).to(device);
}

at::Tensor Rope::apply(const at::Tensor& x, const at::Tensor& positions) const {
  const int64_t B = x.size(0), T = x.size(2), D = x.size(3), half = D / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);  // rotate_half
  if (!positions.defined())
    return x * cos.narrow(0, 0, T).to(x.scalar_type()) + rotated * sin.narrow(0, 0, T).to(x.scalar_type());
  const at::Tensor index = positions.reshape({-1});
  const at::Tensor c = cos.index_select(0, index).view({B, 1, T, D}).to(x.scalar_type());  // (B, 1, T, D)
  const at::Tensor s = sin.index_select(0, index).view({B, 1, T, D}).to(x.scalar_type());  // (B, 1, T, D)
  return x * c + rotated * s;
}

}  // namespace loom_ops
