// stage_schedule.hpp: the order in which each rank of a pipeline runs its micro-batches' forward
// and backward passes (pipeline parallelism: the layers cut into P stages on P ranks), for the
// three schedules torchtitan and Megatron-LM offer, and a timeline that plays the orders against
// each other to measure the bubble they leave.
//
// - gpipe: every forward, then every backward (Huang et al. 2019). Each rank holds the
//   activations of all m micro-batches at once.
// - one_f_one_b: rank r runs P - 1 - r forwards, then one forward and one backward in turn, then
//   the backwards left (PipeDream-Flush, Narayanan et al. 2021). The same bubble as GPipe,
//   (P - 1) / (m + P - 1) of the step, but at most P - r micro-batches held.
// - interleaved: each rank holds v model chunks (virtual stage c * P + r for chunk c), and runs
//   1F1B over micro-batch groups of P (Narayanan et al. 2021, "interleaved schedule"): the bubble
//   shrinks to (P - 1) / (v m + P - 1) for v times the messages. m must be a multiple of P.
//
// A micro-batch's forward on virtual stage s needs its forward on s - 1, its backward on s needs
// the backward on s + 1 (the last stage's backward follows its own forward).
#pragma once

#include <string>
#include <vector>

namespace loom {

enum class StageSchedule { gpipe, one_f_one_b, interleaved };

// "gpipe", "1f1b", "interleaved_1f1b"; a usage Failure naming the choices for anything else.
StageSchedule stage_schedule_from_name(const std::string& name);
const char* stage_schedule_name(StageSchedule schedule);

struct PipelineShape {
  int stages = 1;         // P: ranks in the pipeline
  int micro_batches = 1;  // m
  int chunks = 1;         // v: model chunks per rank (interleaved only; 1 otherwise)
};

// One pass of one micro-batch through one of the rank's chunks.
struct StagePass {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;  // the rank's chunk: virtual stage chunk * P + rank
  bool operator==(const StagePass& o) const {
    return forward == o.forward && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

// Rank `rank`'s passes in order: every micro-batch's forward and backward through each of its
// chunks, once. A usage Failure for a shape the schedule cannot run (interleaved with m not a
// multiple of P, chunks > 1 for the others, any count below 1).
std::vector<StagePass> stage_passes(StageSchedule schedule, const PipelineShape& shape, int rank);

// Every rank's passes played against each other, a forward through one chunk taking 1 / v and a
// backward backward_cost / v, messages free: when the step ends, the share of it each rank sits
// idle (the bubble; the same on every rank), and the most micro-batches whose activations a
// rank holds at once (forwards run minus backwards run), per rank. A runtime Failure if the
// orders deadlock.
struct PipelineTimeline {
  double step = 0;     // the step's length, in forwards of a whole stage
  double bubble = 0;   // idle share of the step
  std::vector<int> most_held;  // by rank
};
PipelineTimeline play_stage_passes(StageSchedule schedule, const PipelineShape& shape, double backward_cost = 2.0);

// What one micro-batch's pass through each virtual stage takes (any one unit), by virtual stage
// c P + r: P x v of each.
struct StageCosts {
  std::vector<double> forward, backward;
};
// The same with each virtual stage's own costs (a cut that leaves the stages unequal): the bubble
// is the ranks' mean idle share of the step. A usage Failure when the costs are not P x v each.
PipelineTimeline play_stage_passes(StageSchedule schedule, const PipelineShape& shape, const StageCosts& costs);

// The schedule's bubble in theory: (P - 1) / (m + P - 1), or (P - 1) / (v m + P - 1) interleaved.
double stage_bubble_theory(StageSchedule schedule, const PipelineShape& shape);

}  // namespace loom
