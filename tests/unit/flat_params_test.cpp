// Flat parameter buffers: parameters become views, autograd accumulates into the flat
// gradient buffer, and norm/clip/zero act on the whole buffer.
#include <doctest/doctest.h>

#include <ATen/ATen.h>

#include "train/flat_params.hpp"

using namespace loom;

TEST_CASE("parameters and gradients become views of one flat buffer") {
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  at::Tensor b = at::randn({4}).requires_grad_(true);
  const at::Tensor w0 = w.detach().clone(), b0 = b.detach().clone();
  std::vector<ModelParam> params = {{"w", &w, 0}, {"b", &b, LOOM_PARAM_FLAG_NO_DECAY}};
  FlatParams flat(params);

  CHECK(flat.numel() == 16);
  CHECK(at::equal(w.detach(), w0));  // values survive the move
  CHECK(at::equal(b.detach(), b0));

  const loom_param_groups& groups = flat.abi();
  REQUIRE(groups.group_count == 1);
  const loom_param_group& g = *groups.groups[0];
  REQUIRE(g.segment_count == 2);
  // Reverse registration order: the last parameter comes first in the buffer.
  CHECK(std::string(g.segments[0]->name) == "b");
  CHECK(g.segments[0]->offset == 0);
  CHECK(g.segments[1]->offset == 4);
  CHECK(g.segments[0]->flags == LOOM_PARAM_FLAG_NO_DECAY);

  const at::Tensor& flat_params = *reinterpret_cast<at::Tensor*>(g.params);
  const at::Tensor& flat_grads = *reinterpret_cast<at::Tensor*>(g.grads);
  CHECK(w.data_ptr<float>() == flat_params.data_ptr<float>() + 4);

  // Two backward passes accumulate in place into the flat gradient buffer.
  const at::Tensor x = at::randn({2, 3});
  (at::matmul(x, w) + b).sum().backward();
  (at::matmul(x, w) + b).sum().backward();
  CHECK(w.grad().data_ptr<float>() == flat_grads.data_ptr<float>() + 4);
  CHECK(at::allclose(flat_grads.narrow(0, 0, 4), at::full({4}, 4.0f)));

  const double norm = flat.grad_norm().item<double>();
  CHECK(norm == doctest::Approx(flat_grads.norm().item<double>()));
  flat.clip(flat.grad_norm(), norm / 2);
  CHECK(flat.grad_norm().item<double>() == doctest::Approx(norm / 2).epsilon(1e-4));
  flat.zero_grad();
  CHECK(flat_grads.abs().sum().item<double>() == 0.0);

  // An in-place update of the flat buffer is seen through the parameter.
  const_cast<at::Tensor&>(flat_params).fill_(1.0);
  CHECK(at::equal(w.detach(), at::ones({3, 4})));
}
