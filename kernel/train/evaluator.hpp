// evaluator.hpp: evaluation on [eval_data] when a hook asks for it (control.request_eval):
// the model in eval mode, no gradients, the same max_batches batches every time, so that
// successive evaluations compare.
#pragma once

#include <functional>

#include "dist/communicator.hpp"
#include "train/device.hpp"
#include "train/model_metrics.hpp"
#include "abi/observer_components.hpp"
#include "train/pipeline.hpp"

namespace loom {

class Evaluator {
 public:
  // comm: sums the loss over every rank's shard (null in a single-process run).
  // precision: the run's; bf16 evaluates under the same autocast as training.
  // lockstep: every rank must run each batch's forward together (row-sharded tables look their
  // rows up with collectives): the ranks agree before each batch, and eval data that gives them
  // different numbers of batches is refused instead of leaving a rank waiting.
  Evaluator(DatasetInstance& data, int64_t max_batches, const at::Device& device, Precision precision,
            Communicator* comm, bool lockstep = false);
  // eval_loss (mean per token, or per the model's units), eval_ppl, eval_tokens, and every
  // metric the model reports as eval_<name>, combined over the batches by its reduction.
  MetricList run(ModelInstance& model);
  // Under pipeline parallelism every stage reads the same eval batches. Where every stage holds
  // the whole model, the rank of the last stage evaluates them alone; where each holds its own
  // layers, every stage runs each batch through its layers (staged: StageRunner::forward_only)
  // and the last gets the loss. The others count nothing (evaluates: false) and only join the sums.
  using StagedForward = std::function<ForwardResult(const Batch&)>;
  void set_pipeline_stage(bool evaluates, StagedForward staged = {}) {
    pipelined_ = true;
    evaluates_ = evaluates;
    staged_ = std::move(staged);
  }

 private:
  // Whether every rank has another batch (false: none has); refuses a split answer.
  bool agree_on_batch(bool mine, int64_t index) const;

  DatasetInstance& data_;
  int64_t max_batches_;
  at::Device device_;
  Precision precision_;
  Communicator* comm_;
  bool lockstep_;
  bool pipelined_ = false, evaluates_ = true;  // set_pipeline_stage
  StagedForward staged_;
  std::string start_state_;  // the dataset's position before the first evaluation
};

}  // namespace loom
