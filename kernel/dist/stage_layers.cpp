#include "dist/stage_layers.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/failure.hpp"

namespace loom {
namespace {

// The cost of stage `stage` of `stages` holding `count` layers.
double stage_cost(int stage, int stages, int count, double embedding_cost, double head_cost) {
  return count + (stage == 0 ? embedding_cost : 0.0) + (stage == stages - 1 ? head_cost : 0.0);
}

std::vector<StageLayers> from_counts(const std::vector<int>& counts) {
  std::vector<StageLayers> out;
  int first = 0;
  for (const int c : counts) {
    out.push_back({first, c});
    first += c;
  }
  return out;
}

}  // namespace

std::vector<StageLayers> cut_layers_by_cost(int layers, int stages, double embedding_cost, double head_cost) {
  if (stages < 1 || layers < stages)
    throw usage_failure("pipeline stages: " + std::to_string(layers) + " layers cannot be cut into " +
                        std::to_string(stages) + " stages of at least one layer each; lower pipeline_parallel (or "
                        "its chunks) to at most the layers");
  if (embedding_cost < 0 || head_cost < 0) throw usage_failure("pipeline stages: a layer cost cannot be negative");
  // best[s][i]: the best cut of layers 0 .. i-1 into stages 0 .. s-1, as (largest stage cost,
  // sum of the squared costs): the slowest stage first, then the evenest; from[s][i] is where
  // stage s-1 starts in it. Of equals the latest start wins, so earlier stages get more.
  using Score = std::pair<double, double>;
  const double none = std::numeric_limits<double>::infinity();
  std::vector<std::vector<Score>> best(stages + 1, std::vector<Score>(layers + 1, {none, none}));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(layers + 1, 0));
  best[0][0] = {0, 0};
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= layers - (stages - s); ++i)
      for (int j = s - 1; j < i; ++j) {
        const double cost = stage_cost(s - 1, stages, i - j, embedding_cost, head_cost);
        const Score score{std::max(best[s - 1][j].first, cost), best[s - 1][j].second + cost * cost};
        if (score <= best[s][i]) best[s][i] = score, from[s][i] = j;
      }
  std::vector<int> counts(stages);
  for (int s = stages, i = layers; s > 0; i = from[s][i], --s) counts[s - 1] = i - from[s][i];
  return from_counts(counts);
}

std::vector<StageLayers> cut_layers_as_listed(const std::vector<int64_t>& counts, int layers, int stages,
                                              const std::string& option) {
  int64_t sum = 0;
  for (const int64_t c : counts) {
    if (c < 1) throw usage_failure(option + ": every stage needs at least one layer; got " + std::to_string(c));
    sum += c;
  }
  if (static_cast<int>(counts.size()) != stages || sum != layers)
    throw usage_failure(option + ": " + std::to_string(counts.size()) + " counts summing to " + std::to_string(sum) +
                        "; list one count per stage (" + std::to_string(stages) + ") summing to the model's " +
                        std::to_string(layers) + " layers");
  return from_counts(std::vector<int>(counts.begin(), counts.end()));
}

std::vector<StageLayers> cut_layers_at(const std::vector<std::string>& split_points, int layers, int stages,
                                       const std::string& option) {
  if (static_cast<int>(split_points.size()) != stages - 1)
    throw usage_failure(option + ": " + std::to_string(split_points.size()) + " split points for " +
                        std::to_string(stages) + " stages; list " + std::to_string(stages - 1) +
                        " (the first layer of every stage after the first, \"layers.N\")");
  std::vector<int64_t> counts;
  int previous = 0;
  for (const std::string& point : split_points) {
    const std::string prefix = "layers.";
    const std::string digits = point.compare(0, prefix.size(), prefix) == 0 ? point.substr(prefix.size()) : "";
    const bool number = !digits.empty() && digits.size() <= 6 &&
                        digits.find_first_not_of("0123456789") == std::string::npos;
    const int first = number ? std::stoi(digits) : -1;
    if (first <= previous || first >= layers)
      throw usage_failure(option + ": \"" + point + "\" is not \"layers.N\" with N increasing from point to point, " +
                          "above 0 and below the model's " + std::to_string(layers) + " layers");
    counts.push_back(first - previous);
    previous = first;
  }
  counts.push_back(layers - previous);
  return cut_layers_as_listed(counts, layers, stages, option);
}

double largest_stage_cost(const std::vector<StageLayers>& cut, double embedding_cost, double head_cost) {
  double most = 0;
  const int stages = static_cast<int>(cut.size());
  for (int s = 0; s < stages; ++s)
    most = std::max(most, stage_cost(s, stages, cut[size_t(s)].count, embedding_cost, head_cost));
  return most;
}

}  // namespace loom
