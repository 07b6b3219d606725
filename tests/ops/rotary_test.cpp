// rotary_test.cpp: the rotary op (ops/rotary/) against the rotation written as complex numbers
// in double: channel i and channel i + D/2 of each head are one complex number, multiplied by
// e^{i p f_i} at position p with f_i = theta^(-2i/D); positions given per row (packed
// documents) against the plain 0..T-1 layout.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/rotary.hpp>

#include <cmath>
#include <stdexcept>

#include "largest_error.hpp"

using loom_ops_test::largest_error;

namespace {

constexpr int64_t B = 2, H = 3, T = 11, D = 8;
constexpr double kTheta = 500.0;

at::Tensor rotated_as_complex(const at::Tensor& x) {  // x: (B, H, T, D) double
  const at::Tensor z = at::complex(x.narrow(-1, 0, D / 2), x.narrow(-1, D / 2, D / 2));  // (B, H, T, D/2)
  const at::Tensor freq = at::pow(kTheta, -at::arange(0, D, 2, at::kDouble) / double(D));  // (D/2)
  const at::Tensor angle = at::outer(at::arange(T, at::kDouble), freq);                    // (T, D/2)
  const at::Tensor turned = z * at::polar(at::ones_like(angle), angle);
  return at::cat({at::real(turned), at::imag(turned)}, -1);
}

}  // namespace

TEST_CASE("rotary: each channel pair turned by its angle, as a complex product") {
  at::manual_seed(6);
  const at::Tensor x = at::randn({B, H, T, D}, at::kDouble);
  const loom_ops::Rope rope(16, D, kTheta, at::kCPU);
  const at::Tensor got = rope.apply(x.to(at::kFloat));
  CHECK(largest_error(got, rotated_as_complex(x)) < 1e-6);
  // Positions given per row: the same as the plain layout when they are 0..T-1.
  const at::Tensor positions = at::arange(T, at::kLong).expand({B, T}).contiguous();
  CHECK(at::equal(rope.apply(x.to(at::kFloat), positions), got));
  // The inverse frequencies themselves, unscaled.
  const at::Tensor freq = loom_ops::rope_inv_freq(D, kTheta, loom_ops::RopeScaling());
  CHECK(largest_error(freq, at::pow(kTheta, -at::arange(0, D, 2, at::kDouble) / double(D))) == 0.0);
}

TEST_CASE("rotary: linear scaling divides every frequency; an odd head dimension is refused") {
  loom_ops::RopeScaling linear;
  linear.type = loom_ops::RopeScaling::Type::linear;
  linear.factor = 4.0;
  const at::Tensor plain = loom_ops::rope_inv_freq(D, kTheta, loom_ops::RopeScaling());
  CHECK(largest_error(loom_ops::rope_inv_freq(D, kTheta, linear), plain / 4.0) == 0.0);
  CHECK_THROWS_AS(loom_ops::Rope(16, 7, kTheta, at::kCPU), std::invalid_argument);
}
