// Optimizer offload's host copies: the optimizer's view is the flat view's layout over other
// tensors, gradients reach them before the update, the update reaches the model after it, and
// the parameters are read again only when the device's were written.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom/torch.hpp>

#include "train/optimizer_offload.hpp"

using namespace loom;

TEST_CASE("offload: the optimizer updates host copies, which go to the parameters after the step") {
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  at::Tensor b = at::randn({4}).requires_grad_(true);
  std::vector<ModelParam> params = {{"w", &w, 0}, {"b", &b, LOOM_PARAM_FLAG_NO_DECAY}};
  FlatParams flat(params, ShardSpec{ShardMode::optimizer, 1, 2});  // this rank's slice: elements [8, 16)
  OptimizerOffload offload(flat);

  const loom_param_group& device = *flat.abi().groups[0];
  REQUIRE(offload.abi().group_count == 1);
  const loom_param_group& host = *offload.abi().groups[0];
  CHECK(host.segments == device.segments);  // the same table: offsets into the slice
  CHECK(host.segment_count == device.segment_count);
  at::Tensor& host_params = tensor(host.params);
  at::Tensor& host_grads = tensor(host.grads);
  CHECK(host_params.data_ptr() != tensor(device.params).data_ptr());
  CHECK(host_params.numel() == 8);
  CHECK(host_grads.numel() == 8);
  CHECK(offload.host_bytes() == 2 * 8 * 4);

  (at::matmul(at::randn({2, 3}), w) + b).sum().backward();
  offload.before_step();
  CHECK(at::equal(host_grads, tensor(device.grads)));
  CHECK(at::equal(host_params, tensor(device.params)));
  const at::Tensor before = w.detach().clone();

  host_params.add_(1.0f);  // the optimizer's update
  CHECK(at::equal(w.detach(), before));  // not seen by the model until after_step
  offload.after_step();
  CHECK(at::equal(tensor(device.params), host_params));
  // w's last 8 elements are the slice (the buffer holds b first, then w)
  CHECK(at::equal(w.detach().flatten().narrow(0, 4, 8), before.flatten().narrow(0, 4, 8) + 1.0f));
  CHECK(at::equal(w.detach().flatten().narrow(0, 0, 4), before.flatten().narrow(0, 0, 4)));

  // A checkpoint load writes the model: the next step starts from its values, not the old copy.
  tensor(device.params).fill_(3.0f);
  offload.before_step();
  CHECK_FALSE(at::equal(host_params, at::full({8}, 3.0f)));  // not told: the copy is kept (no read a step)
  offload.parameters_written();
  offload.before_step();
  CHECK(at::equal(host_params, at::full({8}, 3.0f)));
}
