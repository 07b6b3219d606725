#include <loom_ops/moe_permutation.hpp>

#include "moe_permutation_args.hpp"

namespace loom_ops::reference {

at::Tensor moe_permute(const at::Tensor& x, const at::Tensor& order, int64_t k) {
  moe_permutation_detail::check_permute(x, order, k, "reference::moe_permute");
  return x.index_select(0, at::floor_divide(order, k));
}

at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& order, const at::Tensor& top) {
  moe_permutation_detail::check_combine(rows, order, top, "reference::moe_combine");
  const int64_t k = top.size(1);
  const at::Tensor weighted = rows * top.reshape({-1}).index_select(0, order).unsqueeze(1);
  return at::zeros({top.size(0), rows.size(1)}, weighted.options()).index_add(0, at::floor_divide(order, k), weighted);
}

}  // namespace loom_ops::reference
