#include "dist/stage_schedule.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "base/failure.hpp"

namespace loom {
namespace {

void check_shape(StageSchedule schedule, const PipelineShape& shape, int rank) {
  const std::string what = std::string("pipeline schedule ") + stage_schedule_name(schedule) + ": ";
  if (shape.stages < 1 || shape.micro_batches < 1 || shape.chunks < 1 || rank < 0 || rank >= shape.stages)
    throw usage_failure(what + "stages, micro-batches and chunks must be 1 or more, and the rank one of the stages");
  if (schedule != StageSchedule::interleaved && shape.chunks != 1)
    throw usage_failure(what + "runs one model chunk per rank; use interleaved_1f1b for " +
                        std::to_string(shape.chunks));
  if (schedule == StageSchedule::interleaved && shape.micro_batches % shape.stages != 0)
    throw usage_failure(what + "runs micro-batches in groups of the " + std::to_string(shape.stages) +
                        " stages; make the micro-batches (" + std::to_string(shape.micro_batches) +
                        ") a multiple of pipeline_parallel");
}

// Forwards, then one forward and one backward in turn, then the backwards left: the k-th
// forward and backward of the order given by `pass`.
std::vector<StagePass> warm_steady_cool(int total, int warmup, const std::function<StagePass(bool, int)>& pass) {
  std::vector<StagePass> out;
  warmup = std::min(warmup, total);
  for (int k = 0; k < warmup; ++k) out.push_back(pass(true, k));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(pass(true, warmup + k));
    out.push_back(pass(false, k));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(pass(false, k));
  return out;
}

}  // namespace

StageSchedule stage_schedule_from_name(const std::string& name) {
  if (name == "gpipe") return StageSchedule::gpipe;
  if (name == "1f1b") return StageSchedule::one_f_one_b;
  if (name == "interleaved_1f1b") return StageSchedule::interleaved;
  throw usage_failure("pipeline schedule \"" + name + "\" is not one of \"gpipe\", \"1f1b\", \"interleaved_1f1b\"");
}

const char* stage_schedule_name(StageSchedule schedule) {
  switch (schedule) {
    case StageSchedule::gpipe: return "gpipe";
    case StageSchedule::one_f_one_b: return "1f1b";
    case StageSchedule::interleaved: return "interleaved_1f1b";
  }
  return "?";
}

std::vector<StagePass> stage_passes(StageSchedule schedule, const PipelineShape& shape, int rank) {
  check_shape(schedule, shape, rank);
  const int P = shape.stages, m = shape.micro_batches, v = shape.chunks;
  switch (schedule) {
    case StageSchedule::gpipe:
      return warm_steady_cool(m, m, [](bool forward, int k) { return StagePass{forward, k, 0}; });
    case StageSchedule::one_f_one_b:
      return warm_steady_cool(m, P - 1 - rank, [](bool forward, int k) { return StagePass{forward, k, 0}; });
    case StageSchedule::interleaved:
      // The k-th pass in each direction: groups of P micro-batches, each group through every
      // chunk in turn (backwards from the last chunk); Megatron-LM's warm-up length.
      return warm_steady_cool(m * v, (P - 1 - rank) * 2 + (v - 1) * P, [P, v](bool forward, int k) {
        const int group = k / (P * v), within = k % (P * v), chunk = within / P;
        return StagePass{forward, group * P + within % P, forward ? chunk : v - 1 - chunk};
      });
  }
  return {};
}

PipelineTimeline play_stage_passes(StageSchedule schedule, const PipelineShape& shape, double backward_cost) {
  const size_t stages = static_cast<size_t>(std::max(shape.stages * shape.chunks, 0));
  const double v = shape.chunks;  // a whole stage's forward is 1, cut into v chunks
  return play_stage_passes(schedule, shape,
                           StageCosts{std::vector<double>(stages, 1.0 / v), std::vector<double>(stages, backward_cost / v)});
}

PipelineTimeline play_stage_passes(StageSchedule schedule, const PipelineShape& shape, const StageCosts& costs) {
  const int P = shape.stages, v = shape.chunks, last = P * v - 1;
  const size_t stages = static_cast<size_t>(std::max(P * v, 0));
  if (costs.forward.size() != stages || costs.backward.size() != stages)
    throw usage_failure("pipeline timeline: " + std::to_string(costs.forward.size()) + " forward and " +
                        std::to_string(costs.backward.size()) + " backward costs for " + std::to_string(stages) +
                        " virtual stages");
  std::vector<std::vector<StagePass>> passes;
  for (int r = 0; r < P; ++r) passes.push_back(stage_passes(schedule, shape, r));
  // When each (forward?, virtual stage, micro-batch) ended.
  std::map<std::tuple<bool, int, int>, double> ended;
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0.0);
  PipelineTimeline out;
  out.most_held.assign(P, 0);
  std::vector<int> held(P, 0);
  for (;;) {
    int chosen = -1;
    double earliest = std::numeric_limits<double>::infinity();
    for (int r = 0; r < P; ++r) {
      if (next[r] == passes[r].size()) continue;
      const StagePass& p = passes[r][next[r]];
      const int stage = p.chunk * P + r;
      double ready = free_at[r];
      if (!p.forward || stage > 0) {  // the first stage's forwards wait for nothing
        const auto needed = p.forward ? std::make_tuple(true, stage - 1, p.micro_batch)
                                      : stage == last ? std::make_tuple(true, stage, p.micro_batch)
                                                      : std::make_tuple(false, stage + 1, p.micro_batch);
        const auto found = ended.find(needed);
        if (found == ended.end()) continue;  // not run yet
        ready = std::max(ready, found->second);
      }
      if (ready < earliest) earliest = ready, chosen = r;
    }
    if (chosen < 0) break;
    const StagePass& p = passes[chosen][next[chosen]++];
    const size_t stage = static_cast<size_t>(p.chunk * P + chosen);
    const double end = earliest + (p.forward ? costs.forward[stage] : costs.backward[stage]);
    ended[{p.forward, p.chunk * P + chosen, p.micro_batch}] = end;
    free_at[chosen] = end;
    out.step = std::max(out.step, end);
    held[chosen] += p.forward ? 1 : -1;
    out.most_held[chosen] = std::max(out.most_held[chosen], held[chosen]);
  }
  for (int r = 0; r < P; ++r)
    if (next[r] != passes[r].size())
      throw runtime_failure(std::string("pipeline schedule ") + stage_schedule_name(schedule) + " deadlocks at rank " +
                            std::to_string(r));
  double busy = 0;  // every rank's, summed
  for (size_t s = 0; s < stages; ++s) busy += shape.micro_batches * (costs.forward[s] + costs.backward[s]);
  out.bubble = out.step > 0 ? 1.0 - busy / (P * out.step) : 0.0;
  return out;
}

double stage_bubble_theory(StageSchedule schedule, const PipelineShape& shape) {
  const double P = shape.stages, m = shape.micro_batches;
  const double v = schedule == StageSchedule::interleaved ? shape.chunks : 1;
  return (P - 1) / (v * m + P - 1);
}

}  // namespace loom
