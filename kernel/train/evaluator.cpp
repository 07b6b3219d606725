#include "train/evaluator.hpp"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "base/failure.hpp"

namespace loom {

Evaluator::Evaluator(DatasetInstance& data, int64_t max_batches, const at::Device& device, Precision precision,
                     Communicator* comm, bool lockstep)
    : data_(data), max_batches_(max_batches), device_(device), precision_(precision), comm_(comm),
      lockstep_(lockstep && comm != nullptr) {
  if (data_.has_state()) start_state_ = data_.save_state();
}

bool Evaluator::agree_on_batch(bool mine, int64_t index) const {
  if (!lockstep_) return mine;
  at::Tensor counts = at::tensor({static_cast<int64_t>(mine), static_cast<int64_t>(!mine)}, at::kLong);
  comm_->allreduce_sum(counts);  // ranks with a batch, ranks without
  const int64_t with = counts[0].item<int64_t>(), without = counts[1].item<int64_t>();
  if (with > 0 && without > 0)
    throw usage_failure("[eval_data] " + data_.component().name + ": at evaluation batch " + std::to_string(index + 1) +
                        ", " + std::to_string(with) + " of " + std::to_string(with + without) +
                        " ranks had a batch and the others none; row-sharded tables need every rank in every "
                        "lookup, so the eval data must give each rank as many batches (criteo_tsv does). Use "
                        "[distributed] sparse_tables = \"replicated\" with this eval data");
  return with > 0;
}

MetricList Evaluator::run(ModelInstance& model) {
  if (data_.has_state()) data_.load_state(start_state_);  // the same batches as last time
  at::NoGradGuard no_grad;
  const AutocastScope autocast(precision_, device_);
  model.set_training(false);
  const auto on_device = at::TensorOptions().device(device_).dtype(at::kDouble);
  at::Tensor loss_sum = at::zeros({}, on_device);
  at::Tensor units = at::zeros({}, on_device);  // label tokens, or what the model counts (ABI 1.2)
  int64_t tokens = 0;
  ModelMetrics reported;
  for (int64_t i = 0; i < max_batches_ && (evaluates_ || staged_); ++i) {
    Batch b = data_.next();
    // A finite [eval_data]: evaluate all of it, at most max_batches.
    if (!agree_on_batch(!b.end_of_epoch && !b.end_of_data, i)) break;
    for (auto& field : b.fields) field.second = field.second.to(device_);  // read from the dataset directly: on the CPU
    b.inputs = b.inputs.to(device_);
    b.targets = b.targets.to(device_);
    const ForwardResult out = staged_ ? staged_(b) : model.forward(b.inputs, b.targets, b.fields);
    if (!evaluates_) continue;
    loss_sum += out.loss_sum.to(at::kDouble);
    const at::Tensor batch_units =
        out.units.defined() ? out.units.to(device_) : at::full({}, static_cast<double>(b.tokens), on_device);
    units += batch_units;
    if (!out.metrics.empty()) reported.add(out.metrics, batch_units);
    tokens += b.tokens;
  }
  model.set_training(true);
  at::Tensor totals = at::stack({loss_sum, units, at::full({}, static_cast<double>(tokens), on_device)}).to(at::kCPU);
  if (comm_) comm_->allreduce_sum(totals);
  tokens = static_cast<int64_t>(totals[2].item<double>());
  const double loss = totals[0].item<double>() / std::max(totals[1].item<double>(), 1.0);
  MetricList out = {{"eval_loss", loss}, {"eval_ppl", std::exp(loss)}, {"eval_tokens", static_cast<double>(tokens)}};
  if (pipelined_ && comm_) reported.align_names(*comm_, device_);  // the other stages reported nothing
  for (const auto& [name, value] : reported.finish(comm_, /*steps=*/1)) out.emplace_back("eval_" + name, value);
  return out;
}

}  // namespace loom
