// The window sampler against its specification (plugins/datasets/common/window_sampler.hpp):
// reference splitmix64 stream, golden permutations, disjoint shards over 1, 2 and 4 ranks,
// per-epoch reshuffle, and a resume state that continues exactly or refuses clearly.
#include <doctest/doctest.h>

#include "expect_data_error.hpp"

#include <set>
#include <string>
#include <vector>

#include "plugins/datasets/common/window_sampler.hpp"

using namespace loom::data;

using loom_test::contains;
using loom_test::error_of;

namespace {

WindowSamplerConfig config(uint64_t seed, uint64_t tokens, uint64_t T, uint64_t B, uint32_t rank = 0,
                           uint32_t world = 1) {
  WindowSamplerConfig c;
  c.seed = seed;
  c.token_count = tokens;
  c.seq_len = T;
  c.batch_size = B;
  c.rank = rank;
  c.world_size = world;
  return c;
}

// The next n batches' window starts.
std::vector<std::vector<uint64_t>> draw(WindowSampler& s, uint64_t n) {
  std::vector<std::vector<uint64_t>> out(n);
  for (auto& b : out) s.next(b);
  return out;
}


}  // namespace

TEST_CASE("splitmix64 reproduces the reference stream (seed 1234567)") {
  SplitMix64 rng(1234567);
  const uint64_t expected[] = {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                               4593380528125082431ull, 16408922859458223821ull};
  for (uint64_t e : expected) CHECK(rng.next() == e);
}

TEST_CASE("below(bound) stays in [0, bound) and reaches every value") {
  SplitMix64 rng(7);
  for (uint64_t bound : {1ull, 2ull, 3ull, 7ull, 10ull}) {
    std::set<uint64_t> seen;
    for (int i = 0; i < 2000; ++i) {
      const uint64_t v = rng.below(bound);
      REQUIRE(v < bound);
      seen.insert(v);
    }
    CHECK(seen.size() == bound);
  }
}

TEST_CASE("epoch permutations are pinned: the same on every platform and build") {
  // Computed by an independent Python transcription of the documented algorithm. A change
  // here silently changes every run's data order and breaks resuming older checkpoints.
  std::vector<uint32_t> p;
  shuffled_indices<uint32_t>(0, 0, 10, p);
  CHECK(p == std::vector<uint32_t>{6, 4, 2, 1, 3, 8, 7, 5, 0, 9});
  shuffled_indices<uint32_t>(0, 1, 10, p);
  CHECK(p == std::vector<uint32_t>{1, 0, 7, 3, 6, 9, 2, 8, 5, 4});
  shuffled_indices<uint32_t>(42, 3, 10, p);
  CHECK(p == std::vector<uint32_t>{6, 3, 9, 1, 8, 5, 4, 0, 7, 2});
  std::vector<uint64_t> q;
  shuffled_indices<uint64_t>(7, 0, 1000, q);
  CHECK(std::vector<uint64_t>(q.begin(), q.begin() + 8) == std::vector<uint64_t>{332, 513, 346, 265, 673, 808, 344, 958});
  std::set<uint64_t> all(q.begin(), q.end());
  CHECK(all.size() == 1000);
  CHECK(*all.rbegin() == 999);
}

TEST_CASE("one epoch over 1, 2 and 4 ranks: windows disjoint, complete where counts divide, as counted") {
  const uint64_t T = 8;
  struct Shape {
    uint64_t windows, batch, tail;  // tail: extra tokens too few for another window
  };
  for (const Shape shape : {Shape{48, 4, 0}, Shape{50, 4, 7}, Shape{37, 3, 3}}) {
    const uint64_t N = shape.windows * T + 1 + shape.tail;
    for (uint32_t world : {1u, 2u, 4u}) {
      CAPTURE(shape.windows);
      CAPTURE(shape.batch);
      CAPTURE(world);
      const uint64_t per_rank = shape.windows / world, batches = per_rank / shape.batch;
      std::set<uint64_t> seen;
      uint64_t drawn = 0;
      for (uint32_t rank = 0; rank < world; ++rank) {
        WindowSampler s(config(11, N, T, shape.batch, rank, world), "test");
        CHECK(s.windows() == shape.windows);
        CHECK(s.windows_per_rank() == per_rank);
        REQUIRE(s.batches_per_epoch() == batches);
        for (const auto& batch : draw(s, batches)) {
          REQUIRE(batch.size() == shape.batch);
          for (uint64_t start : batch) {
            CHECK(start % T == 0);
            CHECK(start + T + 1 <= N);
            seen.insert(start / T);
            ++drawn;
          }
        }
        CHECK(s.epoch() == 1);  // exactly one epoch consumed
        CHECK(s.batch() == 0);
      }
      CHECK(drawn == world * batches * shape.batch);
      CHECK(seen.size() == drawn);  // no window on two ranks or twice on one
      if (shape.windows % (world * shape.batch) == 0) CHECK(seen.size() == shape.windows);
    }
  }
}

TEST_CASE("rank r reads permutation positions r, r + R, ... in batch order") {
  const uint64_t T = 4, B = 2, W = 40;
  std::vector<uint32_t> order;
  shuffled_indices<uint32_t>(5, 0, W, order);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    WindowSampler s(config(5, W * T + 1, T, B, rank, 4), "test");
    const auto batches = draw(s, s.batches_per_epoch());
    for (uint64_t b = 0; b < batches.size(); ++b)
      for (uint64_t i = 0; i < B; ++i) CHECK(batches[b][i] == order[(b * B + i) * 4 + rank] * T);
  }
}

TEST_CASE("the same seed gives the same batches; another seed other batches") {
  WindowSampler a(config(3, 2001, 10, 4), "test"), b(config(3, 2001, 10, 4), "test"), c(config(4, 2001, 10, 4), "test");
  const auto xa = draw(a, 120), xb = draw(b, 120), xc = draw(c, 120);  // 120 > 2 epochs of 50
  CHECK(xa == xb);
  CHECK(xa != xc);
}

TEST_CASE("epochs reshuffle: the next epoch visits the same windows in another order") {
  WindowSampler s(config(9, 64 * 16 + 1, 16, 8), "test");
  REQUIRE(s.batches_per_epoch() == 8);
  const auto e0 = draw(s, 8), e1 = draw(s, 8), e2 = draw(s, 8);
  CHECK(e0 != e1);
  CHECK(e1 != e2);
  const auto as_set = [](const std::vector<std::vector<uint64_t>>& e) {
    std::set<uint64_t> out;
    for (const auto& b : e) out.insert(b.begin(), b.end());
    return out;
  };
  CHECK(as_set(e0).size() == 64);
  CHECK(as_set(e0) == as_set(e1));
}

TEST_CASE("a saved state restores to the identical next batches, mid-epoch and across epochs") {
  const auto cfg = config(21, 30 * 8 + 5, 8, 2, 1, 3);  // 10 windows per rank, 5 batches per epoch
  for (uint64_t k : {0, 1, 3, 4, 5, 7, 12}) {
    CAPTURE(k);
    WindowSampler a(cfg, "test");
    REQUIRE(a.batches_per_epoch() == 5);
    draw(a, k);
    const std::string state = a.save_state();
    CHECK(state.size() == 72);
    WindowSampler b(cfg, "test");
    b.load_state(state);
    CHECK(b.epoch() == k / 5);
    CHECK(b.batch() == k % 5);
    CHECK(draw(b, 11) == draw(a, 11));  // runs over at least two epoch boundaries
  }
}

TEST_CASE("a state written under another configuration is refused, naming what differs") {
  const auto cfg = config(1, 401, 8, 2, 0, 2);
  WindowSampler writer(cfg, "corpus.tok");
  draw(writer, 3);
  const std::string state = writer.save_state();
  struct Case {
    WindowSamplerConfig cfg;
    const char* expected;
  };
  const Case cases[] = {
      {config(1, 401, 8, 2, 0, 1), "world size 2 but this run has 1"},
      {config(1, 401, 8, 2, 1, 2), "rank 0 but this run has 1"},
      {config(1, 409, 8, 2, 0, 2), "token count 401 but this run has 409"},
      {config(1, 401, 4, 2, 0, 2), "seq_len 8 but this run has 4"},
      {config(1, 401, 8, 4, 0, 2), "batch_size 2 but this run has 4"},
      {config(2, 401, 8, 2, 0, 2), "seed 1 but this run has 2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expected);
    WindowSampler reader(c.cfg, "corpus.tok");
    const std::string message = error_of([&] { reader.load_state(state); });
    CHECK(contains(message, c.expected));
    CHECK(message.rfind("corpus.tok: ", 0) == 0);
    CHECK(contains(message, "start a fresh run"));
    CHECK(reader.epoch() == 0);  // unchanged
    CHECK(reader.batch() == 0);
  }
  WindowSampler reader(cfg, "corpus.tok");
  CHECK(error_of([&] { reader.load_state(state); }).empty());
  CHECK(reader.batch() == 3);
}

TEST_CASE("a malformed state is refused") {
  const auto cfg = config(1, 401, 8, 2);
  WindowSampler s(cfg, "x.tok");
  const std::string good = s.save_state();
  CHECK(contains(error_of([&] { s.load_state(good.substr(0, 71)); }), "not a window-sampler record"));
  CHECK(contains(error_of([&] { s.load_state("LOOMSYN1" + good.substr(8)); }), "not a window-sampler record"));
  std::string version = good;
  version[8] = 2;
  CHECK(contains(error_of([&] { s.load_state(version); }), "version 2"));
  std::string batch = good;
  batch[64] = char(s.batches_per_epoch());  // one past the last batch of an epoch
  CHECK(contains(error_of([&] { s.load_state(batch); }), "points at batch 25 of an epoch that has only 25"));
  batch[64] = char(s.batches_per_epoch() - 1);
  CHECK(error_of([&] { s.load_state(batch); }).empty());
}

TEST_CASE("too little data is refused at construction with the fix") {
  const std::string longer = error_of([] { WindowSampler(config(0, 8, 8, 1), "small.tok"); });
  CHECK(longer == "small.tok: seq_len 8 is longer than the data: a window needs 9 tokens but there are only 8; "
                  "lower seq_len or use more data");
  CHECK(error_of([] { WindowSampler(config(0, 9, 8, 1), "small.tok"); }).empty());  // exactly one window
  const std::string batch = error_of([] { WindowSampler(config(0, 8 * 7 + 1, 8, 4, 0, 2), "small.tok"); });
  CHECK(contains(batch, "7 windows of 9 tokens give 3 per rank on 2 rank(s), fewer than batch_size 4"));
  CHECK(contains(batch, "lower batch_size or seq_len"));
}
