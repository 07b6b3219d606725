// largest_error.hpp: how tests/ops measure a path against its reference: the largest absolute
// difference over the largest reference value, in double.
#pragma once

#include <ATen/ATen.h>

namespace loom_ops_test {

inline double largest_error(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.detach().to(at::kDouble).cpu(), w = want.detach().to(at::kDouble).cpu();
  return ((g - w).abs().max() / w.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace loom_ops_test
