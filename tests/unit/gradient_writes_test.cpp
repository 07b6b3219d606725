// Gradient accumulation without zero-then-add: the step's first gradient of each parameter is
// written over last step's, later passes add, parameters no pass reached are zeroed at the end,
// and the accumulators' post-hooks (gradient sync) still see the finished slot.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>

#include "train/flat_params.hpp"
#include "train/grad_sync.hpp"
#include "train/gradient_writes.hpp"

using namespace loom;

namespace {

// d/dw and d/db of sum(x w + b), computed on copies outside any flat buffer.
std::pair<at::Tensor, at::Tensor> expected_grads(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  at::Tensor w2 = w.detach().clone().requires_grad_(true), b2 = b.detach().clone().requires_grad_(true);
  (at::matmul(x, w2) + b2).sum().backward();
  return {w2.grad(), b2.grad()};
}

}  // namespace

TEST_CASE("the first pass of a step writes over last step's gradients, later passes add, unreached ones are zeroed") {
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  at::Tensor b = at::randn({4}).requires_grad_(true);
  at::Tensor unused = at::randn({5}).requires_grad_(true);
  std::vector<ModelParam> params = {{"w", &w, 0}, {"b", &b, 0}, {"unused", &unused, 0}};
  FlatParams flat(params);
  GradientWrites writes(params, flat.resident_gradients());
  const at::Tensor buffer = *reinterpret_cast<at::Tensor*>(flat.abi().groups[0]->grads);
  int ready_calls = 0;
  at::Tensor seen_by_hook;
  const auto hook = on_gradient_accumulated(params[0], [&] {
    ++ready_calls;
    seen_by_hook = w.grad().clone();
  });

  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    buffer.fill_(7.0f);  // what last step left: never to be added to
    writes.begin_step();
    const at::Tensor x1 = at::randn({2, 3}), x2 = at::randn({2, 3});
    const auto [w1, b1] = expected_grads(x1, w, b);
    (at::matmul(x1, w) + b).sum().backward();
    CHECK(at::equal(w.grad(), w1));
    CHECK(at::equal(b.grad(), b1));
    CHECK(at::equal(seen_by_hook, w1));  // the post-hook runs after the slot was written
    const auto [w2, b2] = expected_grads(x2, w, b);
    (at::matmul(x2, w) + b).sum().backward();  // the second micro-batch adds
    CHECK(at::allclose(w.grad(), w1 + w2));
    CHECK(at::allclose(b.grad(), b1 + b2));
    CHECK(at::equal(unused.grad(), at::full({5}, 7.0f)));  // untouched until the passes end
    CHECK(writes.end_passes() == 1);
    CHECK(at::equal(unused.grad(), at::zeros({5})));
    CHECK(w.grad().data_ptr() == buffer.data_ptr<float>() + 5 + 4);  // still the flat buffer's views
  }
  CHECK(ready_calls == 4);
}

TEST_CASE("reducing to owners, an unreached parameter's slot is zeroed only where it keeps values between steps") {
  // 16 elements over 2 ranks, rank 1: the buffer is b (4) then w (12); rank 1 owns [8, 16).
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  at::Tensor b = at::randn({4}).requires_grad_(true);
  std::vector<ModelParam> params = {{"w", &w, 0}, {"b", &b, 0}};
  FlatParams flat(params, ShardSpec{ShardMode::gradients, 1, 2});
  GradientWrites writes(params, flat.resident_gradients());
  const at::Tensor buffer = flat.resident_gradients().at(0);
  CHECK(buffer.numel() == 8);
  w.grad().fill_(3.0f);
  b.grad().fill_(3.0f);
  writes.begin_step();
  CHECK(writes.end_passes() == 2);
  // The owned part was zeroed; the rest (given back after each reduce in a real run) untouched.
  CHECK(at::equal(w.grad().reshape({-1}).narrow(0, 4, 8), at::zeros({8})));
  CHECK(at::equal(w.grad().reshape({-1}).narrow(0, 0, 4), at::full({4}, 3.0f)));
  CHECK(at::equal(b.grad(), at::full({4}, 3.0f)));
}

// run.cuda_graph: a replay runs no hooks, so the step sets the record its capture left; a slot the
// record says was written keeps its value at the end of the passes, the others are zeroed.
TEST_CASE("a record of the slots written, set back, decides what the end of the passes zeroes") {
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  at::Tensor unused = at::randn({5}).requires_grad_(true);
  std::vector<ModelParam> params = {{"w", &w, 0}, {"unused", &unused, 0}};
  FlatParams flat(params);
  GradientWrites writes(params, flat.resident_gradients());
  writes.begin_step();
  CHECK(writes.written_slots() == std::vector<bool>{false, false});
  (at::matmul(at::randn({2, 3}), w)).sum().backward();
  const std::vector<bool> after_pass = writes.written_slots();
  CHECK(after_pass == std::vector<bool>{true, false});

  w.grad().fill_(2.0f);  // what a replay wrote, with no hook noting it
  unused.grad().fill_(7.0f);
  writes.begin_step();
  writes.set_written(after_pass);
  CHECK(writes.end_passes() == 1);
  CHECK(at::equal(w.grad(), at::full({3, 4}, 2.0f)));
  CHECK(at::equal(unused.grad(), at::zeros({5})));
  CHECK_THROWS_WITH(writes.set_written({true}), "gradient slots to set: 1 for 2 parameters");
}
