// stage_runner.hpp: one rank's share of a pipeline-parallel step ([distributed] pipeline_parallel
// = P > 1). The model's layers are cut into P x chunks virtual stages (dist/stage_layers.hpp);
// rank r runs virtual stages c P + r. Its forward and backward passes come in its schedule's
// order (dist/stage_schedule.hpp); before a forward it receives the micro-batch's hidden state
// from the stage before, after it sends its own to the stage after, and backward sends the
// gradient of what it received back the other way: c10d point-to-point over the pipeline group,
// sends started without waiting (the schedules never deadlock when sends do not block).
//
// Each stage runs its layers only (ABI 1.17, loom_model_forward_args.layer_begin / layer_end);
// the last computes the loss. Each stage holds its own layers and what lies outside layers
// (train/stage_placement.hpp), or, where that is not built, the whole model; its gradients are
// those of its layers, zero for the rest of what it holds, and the gradient sync's sums
// (train/grad_sync.hpp) make the whole gradient.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "dist/communicator.hpp"
#include "dist/stage_layers.hpp"
#include "dist/stage_schedule.hpp"
#include "train/run_plan.hpp"

namespace loom {

// Throws a usage Failure naming [distributed] pipeline_parallel when the plan combines it with
// what is not built (expert parallelism, shard = "parameters", row-sharded tables), or names
// chunks that do not fit its schedule.
void check_pipeline_parallel(const DistributedSettings& distributed);

// The model's layers cut into the plan's virtual stages (pipeline_parallel x pipeline_chunks),
// by cost or at the listed split points. A usage Failure naming the model when it has fewer
// layers than stages.
std::vector<StageLayers> cut_pipeline(const DistributedSettings& distributed, int64_t model_layers,
                                      const std::string& model);
// The pipeline rank that runs each layer (virtual stage v runs on rank v % ranks).
std::vector<int> stage_of_each_layer(const std::vector<StageLayers>& cut, int ranks);

class StageRunner {
 public:
  // One micro-batch's forward through a range of layers; the caller wraps it in autocast.
  using Forward = std::function<ForwardResult(const Batch&, const ModelInstance::LayerRange&)>;

  // model_layers: what the model said it can be cut between (loom_model_attributes.
  // pipeline_layers); model: its name, for messages. Throws a usage Failure when the layers
  // cannot be cut into the virtual stages.
  StageRunner(Communicator& pipeline, const DistributedSettings& distributed, int64_t model_layers,
              const std::string& model);

  // The passes of one step over `batches` (every stage has the same ones); each loss is
  // multiplied by scale before its backward. Returns each micro-batch's forward (loss sum,
  // units, metrics) on the rank that holds the last stage, an empty vector on the others.
  std::vector<ForwardResult> run(const std::vector<Batch>& batches, double scale, const Forward& forward);

  // One batch's forward through the stages, no backward (evaluation): every stage calls it with
  // the same batch; the rank that holds the last stage gets the loss, the others an empty result.
  ForwardResult forward_only(const Batch& batch, const Forward& forward);

  bool holds_loss() const { return group_.rank() + 1 == group_.world_size(); }
  // The pipeline's bubble since the last call, as it ran and as the schedule would leave it.
  struct Bubble {
    // The share of run()'s time the stages waited for a neighbour's message or for the others
    // to end their passes, the mean over the stages.
    double measured = 0;
    // The schedule played with each virtual stage's mean forward and backward times as they
    // ran, messages free (dist/stage_schedule.hpp): the bubble of these stages' imbalance, above
    // the theory's equal stages; what measured adds to it is the messages and the passes' jitter.
    double expected = 0;
  };
  // Every stage calls it together (one all-reduce); zeros before any step.
  Bubble take_bubble();
  // "stage 1 of 2 (1f1b): layers 3..5"
  std::string describe() const;

 private:
  at::Tensor receive_hidden(int micro_batch, int stage);
  void send_hidden(const at::Tensor& hidden, int micro_batch, int stage);
  // A message's tag: the micro-batch, the virtual stage that receives it, its direction, and
  // whether it is a hidden state's header (its dtype and shape) or its values.
  int tag(int micro_batch, int stage, bool backward, bool header) const;

  // Adds a pass's span, less what it waited, to its chunk's computing time when the pass ends.
  struct PassClock {
    PassClock(StageRunner& runner, const StagePass& pass);
    ~PassClock();
    StageRunner& runner;
    StagePass pass;
    double waited_before;
    std::chrono::steady_clock::time_point started;
  };

  Communicator& group_;
  StageSchedule schedule_;
  int chunks_;
  std::vector<StageLayers> cut_;  // by virtual stage
  double waited_ = 0, ran_ = 0;   // seconds receiving and in run() since take_bubble
  // Seconds each of this rank's chunks computed, forward and backward, and the passes, since take_bubble.
  std::vector<double> forward_seconds_, backward_seconds_;
  int64_t passes_ = 0;
  int micro_batches_ = 0;         // the last step's
  at::Device device_ = at::kCPU;  // where the batches are, and so the hidden states
};

}  // namespace loom
