// Optimizer offload's host copies: the optimizer's view is the flat view's layout over other
// tensors, cut into pieces; gradients reach each piece before its update (during the backward
// when armed), clipped there, the update reaches the model after it, and the parameters are
// read again only when the device's were written.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom/torch.hpp>

#include "train/optimizer_offload.hpp"

using namespace loom;

namespace {

struct Model {
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  at::Tensor b = at::randn({4}).requires_grad_(true);
  std::vector<ModelParam> params = {{"w", &w, 0}, {"b", &b, LOOM_PARAM_FLAG_NO_DECAY}};
  void backward() { (at::matmul(at::randn({2, 3}), w) + b).sum().backward(); }
};

}  // namespace

TEST_CASE("offload: the optimizer updates host copies, which go to the parameters after the step") {
  Model model;
  FlatParams flat(model.params, ShardSpec{ShardMode::optimizer, 1, 2});  // this rank's slice: elements [8, 16)
  OptimizerOffload offload(flat, 1 << 20);
  REQUIRE(offload.pieces().size() == 1);  // 8 floats fit one piece

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

  model.backward();
  const at::Tensor before = model.w.detach().clone();
  int updates = 0;
  offload.step(/*by_pieces=*/false, at::Tensor(), [&](const OptimizerOffload::Piece& piece) {
    ++updates;
    CHECK(piece.begin == piece.end);  // the whole
    CHECK(at::equal(host_grads, tensor(device.grads)));
    CHECK(at::equal(host_params, tensor(device.params)));
    host_params.add_(1.0f);  // the optimizer's update
    CHECK(at::equal(model.w.detach(), before));  // not seen by the model until the step ends
  });
  CHECK(updates == 1);
  CHECK(at::equal(tensor(device.params), host_params));
  // w's last 8 elements are the slice (the buffer holds b first, then w)
  CHECK(at::equal(model.w.detach().flatten().narrow(0, 4, 8), before.flatten().narrow(0, 4, 8) + 1.0f));
  CHECK(at::equal(model.w.detach().flatten().narrow(0, 0, 4), before.flatten().narrow(0, 0, 4)));

  // A checkpoint load writes the model: the next step starts from its values, not the old copy.
  const auto no_update = [](const OptimizerOffload::Piece&) {};
  tensor(device.params).fill_(3.0f);
  offload.step(false, at::Tensor(), [&](const OptimizerOffload::Piece&) {  // not told: the copy is kept (no read a step)
    CHECK_FALSE(at::equal(host_params, at::full({8}, 3.0f)));
    host_params.fill_(3.0f);
  });
  tensor(device.params).fill_(4.0f);
  offload.parameters_written();
  offload.step(false, at::Tensor(), [&](const OptimizerOffload::Piece&) {
    CHECK(at::equal(host_params, at::full({8}, 4.0f)));
  });
  offload.step(false, at::Tensor(), no_update);
  CHECK(at::equal(tensor(device.params), at::full({8}, 4.0f)));
}

TEST_CASE("offload by pieces: each piece's gradients have arrived when it is updated, and all come back") {
  Model model;
  FlatParams flat(model.params, ShardSpec{});  // the whole buffer: 16 floats
  OptimizerOffload offload(flat, 5 * 4);       // pieces of 5 floats: [0, 5) [5, 10) [10, 15) [15, 16)
  REQUIRE(offload.pieces().size() == 4);
  CHECK(offload.pieces().back().begin == 15);
  CHECK(offload.pieces().back().end == 16);
  const loom_param_group& device = *flat.abi().groups[0];
  at::Tensor& host_params = tensor(offload.abi().groups[0]->params);
  at::Tensor& host_grads = tensor(offload.abi().groups[0]->grads);

  model.backward();
  const at::Tensor before = tensor(device.params).clone();
  int64_t next = 0;
  offload.step(/*by_pieces=*/true, at::Tensor(), [&](const OptimizerOffload::Piece& piece) {
    CHECK(piece.group == 0);
    CHECK(piece.begin == next);  // in order, each element once
    next = piece.end;
    const auto of = [&](const at::Tensor& t) { return t.narrow(0, piece.begin, piece.end - piece.begin); };
    CHECK(at::equal(of(host_grads), of(tensor(device.grads))));
    CHECK(at::equal(of(host_params), of(before)));
    of(host_params).sub_(of(host_grads));
  });
  CHECK(next == 16);
  CHECK(at::equal(tensor(device.params), before - tensor(device.grads)));
  CHECK(at::equal(host_params, tensor(device.params)));
}

TEST_CASE("offload during the backward: complete pieces leave early, a later gradient sends its piece again, "
          "and the clipping factor is applied to the host copies only") {
  Model model;
  FlatParams flat(model.params, ShardSpec{});
  OptimizerOffload offload(flat, 4 * 4, model.params);  // [0, 4) is b, [4, 16) is w in three pieces
  REQUIRE(offload.pieces().size() == 4);
  const loom_param_group& device = *flat.abi().groups[0];
  at::Tensor& host_grads = tensor(offload.abi().groups[0]->grads);
  const auto no_update = [](const OptimizerOffload::Piece&) {};

  model.backward();  // not armed (an earlier micro-batch): nothing leaves
  offload.step(true, at::Tensor(), no_update);
  CHECK(offload.early_pieces() == 0);

  offload.arm();
  model.backward();
  CHECK(at::equal(host_grads, tensor(device.grads)));  // on the CPU the hooks' copies are done at once
  const at::Tensor device_grads = tensor(device.grads).clone();
  const at::Tensor clip = at::full({}, 0.5f);
  offload.step(true, clip, [&](const OptimizerOffload::Piece& p) {
    const auto of = [&](const at::Tensor& t) { return t.narrow(0, p.begin, p.end - p.begin); };
    CHECK(at::equal(of(host_grads), of(device_grads) * 0.5f));
  });
  CHECK(offload.early_pieces() == 4);
  CHECK(at::equal(tensor(device.grads), device_grads));  // the device's are not clipped

  // w gets a second gradient after its pieces left (a parameter used in two graphs): they go again.
  offload.arm();
  model.backward();
  (at::matmul(at::randn({2, 3}), model.w)).sum().backward();
  offload.step(true, at::Tensor(), [&](const OptimizerOffload::Piece&) {});
  CHECK(offload.early_pieces() == 1);  // b's piece only
  CHECK(at::equal(host_grads, tensor(device.grads)));

  // Disarmed (the device's gradients were rescaled after the backward): every piece goes again.
  offload.arm();
  model.backward();
  tensor(device.grads).mul_(3.0f);
  offload.disarm();
  offload.step(true, at::Tensor(), no_update);
  CHECK(offload.early_pieces() == 0);
  CHECK(at::equal(host_grads, tensor(device.grads)));
}
