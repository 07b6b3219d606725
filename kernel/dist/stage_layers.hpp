// stage_layers.hpp: which of a model's layers each pipeline stage holds (pipeline parallelism:
// the layers cut into S = pipeline_parallel x chunks virtual stages, contiguous, in order; the
// first also holds the embedding, the last the output layer and the loss). Cut by cost, so that
// the slowest stage, which sets the pipeline's pace, is as fast as a cut can make it, or as the
// manifest lists (torchtitan and Megatron-LM offer both).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

struct StageLayers {
  int first = 0;  // the stage's first layer
  int count = 0;  // layers first .. first + count - 1
};

// n layers over `stages` stages, each at least one layer, minimising the largest stage cost: a
// layer costs 1, the embedding `embedding_cost` (on stage 0) and the output layer with its loss
// `head_cost` (on the last stage), both in layers (a 151k-token vocabulary's output layer can
// outweigh several layers). Of the cuts with that cost, the evenest (the least sum of squared
// stage costs), and of those the one that gives earlier stages more layers. A usage Failure when there are fewer layers than stages or a cost is negative.
std::vector<StageLayers> cut_layers_by_cost(int layers, int stages, double embedding_cost, double head_cost);

// The manifest's own cut: counts[s] layers for stage s. A usage Failure naming `option` unless
// there is one count per stage, each at least 1, summing to the model's layers.
std::vector<StageLayers> cut_layers_as_listed(const std::vector<int64_t>& counts, int layers, int stages,
                                              const std::string& option);

// The cut torchtitan's split points describe: the first layer of every stage after the first,
// "layers.N", increasing, each inside the model (0 < N < layers), stages - 1 of them. A usage
// Failure naming `option` and the point otherwise.
std::vector<StageLayers> cut_layers_at(const std::vector<std::string>& split_points, int layers, int stages,
                                       const std::string& option);

// The largest stage cost of a cut, as cut_layers_by_cost counts it.
double largest_stage_cost(const std::vector<StageLayers>& cut, double embedding_cost, double head_cost);

}  // namespace loom
