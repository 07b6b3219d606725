// Pipeline stages' layers (dist/stage_layers.hpp): the cut by cost is the best of every possible
// cut (checked against all of them), uniform when only layers count, lighter at the ends that hold
// the embedding and the output layer; a listed cut is taken as given; bad ones are refused by name.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <cmath>
#include <functional>
#include <vector>

#include "base/failure.hpp"
#include "dist/stage_layers.hpp"

using namespace loom;

namespace {

std::vector<int> counts_of(const std::vector<StageLayers>& cut) {
  std::vector<int> out;
  int next = 0;
  for (const StageLayers& s : cut) {
    CHECK(s.first == next);  // contiguous, in order
    CHECK(s.count >= 1);
    out.push_back(s.count);
    next += s.count;
  }
  return out;
}

// The (largest cost, sum of squared costs) of the best of all cuts of n layers into S stages.
std::pair<double, double> best_of_all(int n, int S, double embedding, double head) {
  std::pair<double, double> best{1e300, 1e300};
  std::vector<StageLayers> cut(static_cast<size_t>(S));
  std::function<void(int, int)> place = [&](int stage, int first) {
    if (stage == S - 1) {
      cut[size_t(stage)] = {first, n - first};
      double most = 0, squares = 0;
      for (int s = 0; s < S; ++s) {
        const double c = cut[size_t(s)].count + (s == 0 ? embedding : 0) + (s == S - 1 ? head : 0);
        most = std::max(most, c), squares += c * c;
      }
      best = std::min(best, {most, squares});
      return;
    }
    for (int count = 1; first + count <= n - (S - 1 - stage); ++count) {
      cut[size_t(stage)] = {first, count};
      place(stage + 1, first + count);
    }
  };
  place(0, 0);
  return best;
}

}  // namespace

TEST_CASE("a cut by cost is the best of all cuts, for every layer count, stage count and end cost tried") {
  for (int n = 1; n <= 10; ++n)
    for (int S = 1; S <= std::min(n, 5); ++S)
      for (const double embedding : {0.0, 0.5, 2.0})
        for (const double head : {0.0, 1.0, 3.5}) {
          CAPTURE(n);
          CAPTURE(S);
          CAPTURE(embedding);
          CAPTURE(head);
          const std::vector<StageLayers> cut = cut_layers_by_cost(n, S, embedding, head);
          REQUIRE(cut.size() == size_t(S));
          const std::vector<int> counts = counts_of(cut);
          double squares = 0;
          for (int s = 0; s < S; ++s) {
            const double c = counts[size_t(s)] + (s == 0 ? embedding : 0) + (s == S - 1 ? head : 0);
            squares += c * c;
          }
          const auto best = best_of_all(n, S, embedding, head);
          CHECK(largest_stage_cost(cut, embedding, head) == doctest::Approx(best.first));
          CHECK(squares == doctest::Approx(best.second));
        }
}

TEST_CASE("cuts written out: uniform when only layers count, lighter ends for the embedding and the output layer") {
  CHECK(counts_of(cut_layers_by_cost(8, 4, 0, 0)) == std::vector<int>{2, 2, 2, 2});
  CHECK(counts_of(cut_layers_by_cost(9, 4, 0, 0)) == std::vector<int>{3, 2, 2, 2});  // earlier stages get more
  // A 2-layer output layer: the last stage holds one layer (cost 3), the others share the rest.
  const std::vector<StageLayers> heavy_head = cut_layers_by_cost(8, 4, 0, 2);
  CHECK(largest_stage_cost(heavy_head, 0, 2) == 3);
  CHECK(heavy_head.back().count == 1);
  // The embedding costs 1 and the output layer 2: no stage may cost more than 4, so the first
  // holds 3 layers and the last at most 2 (with 1, the middle ones hold 4 each: as even).
  const std::vector<int> both_ends = counts_of(cut_layers_by_cost(12, 4, 1, 2));
  CHECK(both_ends.front() == 3);
  CHECK(both_ends.back() <= 2);
  CHECK(largest_stage_cost(cut_layers_by_cost(12, 4, 1, 2), 1, 2) == 4);
}

TEST_CASE("a listed cut is taken as given; cuts that cannot be are refused by name") {
  CHECK(counts_of(cut_layers_as_listed({1, 3, 3, 1}, 8, 4, "[distributed] pipeline_layers")) ==
        std::vector<int>{1, 3, 3, 1});
  CHECK_THROWS_WITH_AS(cut_layers_as_listed({4, 4, 1}, 8, 4, "[distributed] pipeline_layers"),
                       doctest::Contains("[distributed] pipeline_layers: 3 counts summing to 9; list one count per stage (4)"),
                       Failure);
  CHECK_THROWS_WITH_AS(cut_layers_as_listed({4, 0, 2, 2}, 8, 4, "x"), doctest::Contains("at least one layer"), Failure);
  CHECK_THROWS_WITH_AS(cut_layers_by_cost(3, 4, 0, 0), doctest::Contains("3 layers cannot be cut into 4 stages"), Failure);
  CHECK_THROWS_AS(cut_layers_by_cost(8, 2, -1, 0), Failure);
}

TEST_CASE("torchtitan's split points give the cut they name; points that cannot be are refused by name") {
  const std::string option = "[distributed] pipeline_split_points";
  CHECK(counts_of(cut_layers_at({"layers.5"}, 8, 2, option)) == std::vector<int>{5, 3});
  CHECK(counts_of(cut_layers_at({"layers.1", "layers.4", "layers.7"}, 8, 4, option)) == std::vector<int>{1, 3, 3, 1});
  CHECK_THROWS_WITH_AS(cut_layers_at({"layers.2", "layers.4"}, 8, 2, option),
                       doctest::Contains("2 split points for 2 stages; list 1"), Failure);
  for (const char* bad : {"layers.0", "layers.8", "layer.4", "layers.", "layers.4x", "layers.-1", "4"}) {
    const std::string refusal = option + ": \"" + bad + "\" is not \"layers.N\"";
    CHECK_THROWS_WITH_AS(cut_layers_at({bad}, 8, 2, option), doctest::Contains(refusal.c_str()), Failure);
  }
  CHECK_THROWS_WITH_AS(cut_layers_at({"layers.5", "layers.3"}, 8, 3, option), doctest::Contains("\"layers.3\""),
                       Failure);
}
