// evaluator.hpp: evaluation on [eval_data] when a hook asks for it (control.request_eval):
// the model in eval mode, no gradients, the same max_batches batches every time, so that
// successive evaluations compare.
#pragma once

#include "observer_components.hpp"
#include "pipeline.hpp"

namespace loom {

class Evaluator {
 public:
  Evaluator(DatasetInstance& data, int64_t max_batches, const at::Device& device);
  // eval_loss (mean per token), eval_ppl and eval_tokens.
  MetricList run(ModelInstance& model);

 private:
  DatasetInstance& data_;
  int64_t max_batches_;
  at::Device device_;
  std::string start_state_;  // the dataset's position before the first evaluation
};

}  // namespace loom
