// Flat parameter buffers: parameters become views, autograd accumulates into the flat
// gradient buffer, and norm/clip/zero act on the whole buffer.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>

#include <cmath>

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
  flat.scale_grads(loom::clip_factor(flat.grad_norm(), norm / 2));
  CHECK(flat.grad_norm().item<double>() == doctest::Approx(norm / 2).epsilon(1e-4));
  flat.zero_grad();
  CHECK(flat_grads.abs().sum().item<double>() == 0.0);

  // An in-place update of the flat buffer is seen through the parameter.
  const_cast<at::Tensor&>(flat_params).fill_(1.0);
  CHECK(at::equal(w.detach(), at::ones({3, 4})));
}

TEST_CASE("sharded: each rank's optimizer sees its equal slice, segments cut at the slice edges") {
  // 16 elements over 3 ranks: padded to 18, chunks of 6: [0,6) [6,12) [12,16).
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    at::Tensor w = at::randn({3, 4}).requires_grad_(true);
    at::Tensor b = at::randn({4}).requires_grad_(true);
    std::vector<ModelParam> params = {{"w", &w, 0}, {"b", &b, LOOM_PARAM_FLAG_NO_DECAY}};
    FlatParams flat(params, ShardSpec{ShardMode::optimizer, rank, 3});
    CHECK(flat.numel() == 16);
    const OwnedSlice slice = flat.owned_slices().at(0);
    CHECK(slice.start == 6 * rank);
    CHECK(slice.length == (rank == 2 ? 4 : 6));
    CHECK(flat.param_buffers().at(0).numel() == 18);  // the padding lets all-gather use equal chunks
    const loom_param_group& g = *flat.abi().groups[0];
    const at::Tensor& owned = *reinterpret_cast<at::Tensor*>(g.params);
    CHECK(owned.numel() == slice.length);
    CHECK(owned.data_ptr<float>() == flat.param_buffers()[0].data_ptr<float>() + slice.start);
    // The buffer is b (4) then w (12): rank 0 has b whole and w's first 2; rank 1 w's next 6.
    if (rank == 0) {
      REQUIRE(g.segment_count == 2);
      CHECK(std::string(g.segments[0]->name) == "b");
      CHECK(g.segments[0]->flags == LOOM_PARAM_FLAG_NO_DECAY);
      CHECK(g.segments[1]->offset == 4);
      CHECK(g.segments[1]->numel == 2);
      CHECK(g.segments[1]->flags == LOOM_PARAM_FLAG_PARTIAL);
      CHECK(g.segments[1]->shape[0] == 3);  // the whole parameter's shape
    } else {
      REQUIRE(g.segment_count == 1);
      CHECK(std::string(g.segments[0]->name) == "w");
      CHECK(g.segments[0]->offset == 0);
      CHECK(g.segments[0]->numel == slice.length);
      CHECK(g.segments[0]->flags == LOOM_PARAM_FLAG_PARTIAL);
    }
    // Buckets stop at slice edges and name their owner.
    const auto buckets = flat.grad_buckets(1 << 20);
    REQUIRE(buckets.size() == 3);
    for (int b = 0; b < 3; ++b) CHECK(buckets[static_cast<size_t>(b)].owner == b);
    CHECK(buckets[1].grads.numel() == 6);
  }
}

TEST_CASE("stage layers: a stage's layer parameters fill placed groups after the others, bucketed apart") {
  // Registered as a model does: embedding (outside layers), two layers' weights, output layer.
  at::Tensor embed = at::randn({5, 2}).requires_grad_(true);
  at::Tensor layer0 = at::randn({2, 2}).requires_grad_(true);
  at::Tensor layer1 = at::randn({3}).requires_grad_(true);
  at::Tensor head = at::randn({2, 5}).requires_grad_(true);
  std::vector<ModelParam> params = {{"embed", &embed, 0}, {"l0", &layer0, 0, 0}, {"l1", &layer1, 0, 1},
                                    {"head", &head, 0}};
  ShardSpec spec;
  spec.stage_layers = true;
  FlatParams flat(params, spec);
  REQUIRE(flat.placed_groups() == std::vector<bool>{false, true});
  const auto tables = flat.segment_tables();
  // Each group in reverse registration order: what lies outside layers first.
  REQUIRE(tables[0].size() == 2);
  CHECK(tables[0][0].name == "head");
  CHECK(tables[0][1].name == "embed");
  REQUIRE(tables[1].size() == 2);
  CHECK(tables[1][0].name == "l1");
  CHECK(tables[1][1].name == "l0");
  // Buckets never mix the two: they are summed over different ranks.
  for (const auto& bucket : flat.grad_buckets(1 << 20))
    CHECK(bucket.grads.numel() == (bucket.placed ? 7 : 20));
  // The norm adds both groups' squares.
  (embed.sum() + layer0.sum() * 2 + layer1.sum() * 3 + head.sum()).backward();
  CHECK(flat.grad_norm().item<double>() == doctest::Approx(std::sqrt(10.0 + 4 * 4 + 9 * 3 + 10)));
  CHECK(flat.owned_grad_square_sum(true).item<double>() == doctest::Approx(4 * 4 + 9 * 3));
}

TEST_CASE("stage layers, sharded: the layers are cut among the stage's replicas, the rest among all ranks") {
  // Rank 3 of 4 in the replica group, the second of its stage's 2 replicas (ZeRO-2).
  at::Tensor embed = at::randn({2, 5}).requires_grad_(true);   // outside layers: 10 elements over 4 ranks
  at::Tensor layer0 = at::randn({7}).requires_grad_(true);     // the stage's layer: 7 over 2 ranks
  std::vector<ModelParam> params = {{"embed", &embed, 0}, {"l0", &layer0, 0, 0}};
  ShardSpec spec{ShardMode::gradients, 3, 4};
  spec.stage_layers = true;
  spec.placed_rank = 1;
  spec.placed_world_size = 2;
  FlatParams flat(params, spec);
  REQUIRE(flat.placed_groups() == std::vector<bool>{false, true});
  CHECK(flat.sharded_groups() == std::vector<bool>{true, true});
  CHECK(flat.sharing_ranks() == std::vector<int>{4, 2});
  const auto owned = flat.owned_slices();
  CHECK(owned[0].start == 9);  // chunks of 3: 0, 3, 6, 9 (one element left for the last rank)
  CHECK(owned[0].length == 1);
  CHECK(owned[1].start == 4);  // chunks of 4: 0, 4
  CHECK(owned[1].length == 3);
  // Each group's buckets end at its own slice edges, owned by a rank among its own ranks.
  std::vector<int> placed_owners, other_owners;
  for (const auto& bucket : flat.grad_buckets(1 << 20)) (bucket.placed ? placed_owners : other_owners).push_back(bucket.owner);
  CHECK(placed_owners == std::vector<int>{0, 1});
  CHECK(other_owners == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("the gradient norm of a million elements is the double-precision norm's within 1e-7") {
  // LibTorch's CPU norm of a float tensor drifts by 4e-5 here; clipping scales every update by it.
  at::manual_seed(0);
  at::Tensor w = at::zeros({1 << 20}).requires_grad_(true);
  std::vector<ModelParam> params = {{"w", &w, 0}};
  FlatParams flat(params);
  const at::Tensor g = at::randn({1 << 20}) * at::rand({1 << 20}).pow(4);
  (w * g).sum().backward();
  const double exact = g.to(at::kDouble).norm().item<double>();
  CHECK(std::abs(flat.grad_norm().item<double>() / exact - 1) < 1e-7);
}

TEST_CASE("layout only: a second build's parameters are adopted as this rank's slice, the rest reads as zeros") {
  // 16 elements over 3 ranks as above; rank 1 owns [6, 12): w's elements 2..7.
  at::Tensor w_shape = at::empty({3, 4}), b_shape = at::empty({4});
  std::vector<ModelParam> first = {{"w", &w_shape, 0}, {"b", &b_shape, LOOM_PARAM_FLAG_NO_DECAY}};
  FlatParams flat(first, ShardSpec{ShardMode::parameters, 1, 3}, FlatParams::LayoutOnly{});
  CHECK(w_shape.data_ptr() != flat.param_buffers()[0].data_ptr());  // the first build's tensors stay as they were
  CHECK(flat.param_buffers()[0].abs().sum().item<double>() == 0.0);

  at::Tensor w = at::arange(1, 13, at::kFloat).view({3, 4}).requires_grad_(true);
  at::Tensor b = at::arange(101, 105, at::kFloat).requires_grad_(true);
  at::Tensor table = at::ones({2, 2});
  CHECK(flat.adopt("w", w));
  CHECK_FALSE(flat.adopt("table", table));  // not in the layout (a sparse table): left alone
  CHECK(at::equal(table, at::ones({2, 2})));
  at::Tensor wrong = at::zeros({4, 3});
  CHECK_THROWS_WITH_AS(flat.adopt("b", wrong), doctest::Contains("its create must make the same parameters"),
                       std::exception);
  // b was not adopted: take_over keeps its owned part, as adopt does, and counts w alone.
  std::vector<ModelParam> second = {{"w", &w, 0}, {"b", &b, LOOM_PARAM_FLAG_NO_DECAY}};
  CHECK(flat.take_over(second) == 1);
  const at::Tensor buffer = flat.param_buffers()[0];
  CHECK(w.data_ptr<float>() == buffer.data_ptr<float>() + 4);
  CHECK(at::equal(buffer.narrow(0, 6, 6), at::arange(3, 9, at::kFloat)));  // w's slice, kept
  CHECK(at::equal(w.detach().view({-1}).narrow(0, 0, 2), at::zeros({2})));  // rank 0's part: never written
  CHECK(at::equal(w.detach().view({-1}).narrow(0, 8, 4), at::zeros({4})));  // rank 2's part
  CHECK(b.data_ptr<float>() == buffer.data_ptr<float>());                   // rebound, at elements 0..3:
  CHECK(at::equal(b.detach(), at::zeros({4})));                             // rank 0's part, not kept here
  const at::Tensor& owned_grads = *reinterpret_cast<at::Tensor*>(flat.abi().groups[0]->grads);  // from element 6
  CHECK(w.grad().data_ptr<float>() == owned_grads.data_ptr<float>() - 6 + 4);

  std::vector<ModelParam> fewer = {{"w", &w, 0}};
  CHECK_THROWS_WITH_AS(flat.take_over(fewer), doctest::Contains("its first build had 2"), std::exception);
}
