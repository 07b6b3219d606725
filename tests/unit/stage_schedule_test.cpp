// Pipeline schedules (dist/stage_schedule.hpp): every rank's order of passes is complete and
// runs each forward before its backward; played against each other they never deadlock, leave the
// bubble the papers give, and hold as many micro-batches as each schedule promises; shapes a
// schedule cannot run are refused by name.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <cmath>
#include <set>
#include <stdexcept>
#include <tuple>

#include "base/failure.hpp"
#include "dist/stage_schedule.hpp"

using namespace loom;

namespace {

// Each (micro-batch, chunk) forward once and backward once, the forward first.
void check_complete(const std::vector<StagePass>& passes, const PipelineShape& shape) {
  std::set<std::pair<int, int>> forwards, backwards;
  for (const StagePass& p : passes) {
    const std::pair<int, int> key{p.micro_batch, p.chunk};
    CHECK(p.micro_batch >= 0);
    CHECK(p.micro_batch < shape.micro_batches);
    CHECK(p.chunk >= 0);
    CHECK(p.chunk < shape.chunks);
    if (p.forward) {
      CHECK(forwards.insert(key).second);
    } else {
      CHECK(forwards.count(key) == 1);  // its forward ran before
      CHECK(backwards.insert(key).second);
    }
  }
  CHECK(forwards.size() == size_t(shape.micro_batches * shape.chunks));
  CHECK(backwards.size() == forwards.size());
}

}  // namespace

TEST_CASE("every schedule, every rank: each pass once, forwards first; the bubble of the theory, no deadlock") {
  for (const StageSchedule schedule : {StageSchedule::gpipe, StageSchedule::one_f_one_b, StageSchedule::interleaved}) {
    for (const int P : {1, 2, 4}) {
      for (const int m : {4, 8, 16}) {
        const PipelineShape shape{P, m, schedule == StageSchedule::interleaved ? 2 : 1};
        CAPTURE(stage_schedule_name(schedule));
        CAPTURE(P);
        CAPTURE(m);
        for (int r = 0; r < P; ++r) check_complete(stage_passes(schedule, shape, r), shape);
        // Backward twice a forward's cost, messages free: the bubble is exactly the theory's.
        const PipelineTimeline t = play_stage_passes(schedule, shape, 2.0);
        CHECK(std::abs(t.bubble - stage_bubble_theory(schedule, shape)) < 1e-9);
      }
    }
  }
}

TEST_CASE("what each schedule holds: GPipe every micro-batch, 1F1B at most P - r, interleaved 1F1B its warm-up") {
  const PipelineShape shape{4, 8, 1};
  const PipelineTimeline gpipe = play_stage_passes(StageSchedule::gpipe, shape);
  const PipelineTimeline one = play_stage_passes(StageSchedule::one_f_one_b, shape);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(gpipe.most_held[size_t(r)] == 8);
    CHECK(one.most_held[size_t(r)] == 4 - r);
  }
  // The same bubble: 3 / 11 of the step.
  CHECK(std::abs(gpipe.bubble - 3.0 / 11.0) < 1e-9);
  CHECK(std::abs(one.bubble - 3.0 / 11.0) < 1e-9);
  // Two chunks a rank: a third as much bubble's share, 3 / 19, for more (micro-batch, chunk) held.
  const PipelineShape two{4, 8, 2};
  const PipelineTimeline interleaved = play_stage_passes(StageSchedule::interleaved, two);
  CHECK(std::abs(interleaved.bubble - 3.0 / 19.0) < 1e-9);
  CHECK(interleaved.most_held[0] == 2 * 3 + 4 + 1);  // Megatron-LM's warm-up for rank 0, then one more
}

TEST_CASE("1F1B on 4 stages, rank 0 and rank 3: the orders written out") {
  const auto order = [](int rank) {
    std::string out;
    for (const StagePass& p : stage_passes(StageSchedule::one_f_one_b, {4, 6, 1}, rank))
      out += (p.forward ? "F" : "B") + std::to_string(p.micro_batch) + " ";
    return out;
  };
  CHECK(order(0) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  CHECK(order(3) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
}

TEST_CASE("shapes a schedule cannot run are refused by name") {
  CHECK_THROWS_WITH_AS(stage_passes(StageSchedule::interleaved, {4, 6, 2}, 0),
                       doctest::Contains("make the micro-batches (6) a multiple of pipeline_parallel"), Failure);
  CHECK_THROWS_WITH_AS(stage_passes(StageSchedule::one_f_one_b, {4, 8, 2}, 0),
                       doctest::Contains("use interleaved_1f1b"), Failure);
  CHECK_THROWS_WITH_AS(stage_passes(StageSchedule::gpipe, {2, 4, 1}, 2), doctest::Contains("the rank one of"), Failure);
  CHECK_THROWS_WITH_AS(stage_schedule_from_name("zb"), doctest::Contains("\"gpipe\", \"1f1b\", \"interleaved_1f1b\""),
                       Failure);
  CHECK(stage_schedule_from_name("interleaved_1f1b") == StageSchedule::interleaved);
}

TEST_CASE("unequal stages: the timeline plays each virtual stage's own pass times") {
  // GPipe, 2 stages, 2 micro-batches; stage 0 forwards in 1 and backs in 2, stage 1 takes 2 and 2.
  // Rank 1's forwards end at 3 and 5, its backwards at 7 and 9; rank 0's backwards at 9 and 11.
  // Busy 6 + 8 of 2 x 11: a bubble of 8 / 22, above the equal stages' 1 / 3.
  const PipelineShape shape{2, 2, 1};
  const PipelineTimeline t = play_stage_passes(StageSchedule::gpipe, shape, StageCosts{{1, 2}, {2, 2}});
  CHECK(t.step == 11.0);
  CHECK(std::abs(t.bubble - 8.0 / 22.0) < 1e-12);
  // Equal costs give the theory, whatever their unit.
  const PipelineShape two{4, 8, 2};
  const std::vector<double> forward(8, 0.5), backward(8, 1.0);
  CHECK(std::abs(play_stage_passes(StageSchedule::interleaved, two, StageCosts{forward, backward}).bubble -
                 stage_bubble_theory(StageSchedule::interleaved, two)) < 1e-9);
  CHECK_THROWS_WITH_AS(play_stage_passes(StageSchedule::gpipe, shape, StageCosts{{1}, {2}}),
                       doctest::Contains("1 forward and 1 backward costs for 2 virtual stages"), loom::Failure);
}
