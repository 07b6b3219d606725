// train_step.cpp: one optimizer step of the training loop (docs/design.md "One training
// step"): the micro-batches it draws, forward and backward over them, the step's loss and
// gradient norm (on the device until read, step_values.hpp), clipping, the schedule and the
// update, and the batch bookkeeping around them (epochs, the end of the data, units).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/failure.hpp"
#include "train/trainer_loop.hpp"

namespace loom {

loom_control Trainer::train_step(Prefetcher& prefetch) {
  const int64_t step = progress_.step + 1;
  loom_control requests = fire(LOOM_EVENT_STEP_BEGIN);

  // 1. Draw the micro-batches and count the tokens that carry loss.
  const auto data_started = Clock::now();
  epoch_ended_ = false;
  std::vector<Batch> batches{next_batch(prefetch, requests)};
  bool ran_out = batches.front().end_of_data;
  int64_t tokens = batches.front().tokens;
  for (int64_t i = 1, n = ran_out ? 1 : micro_batches_per_step(batches.front()); i < n && !ran_out; ++i) {
    batches.push_back(next_batch(prefetch, requests));
    ran_out = batches.back().end_of_data;
    tokens += batches.back().tokens;
  }
  window_.add_data_seconds(seconds_since(data_started));
  if (comm_) {  // the global count, so every token weighs the same on every rank; and whether any rank ran out
    // Pipeline stages share their batches: the tokens count on the stage that computes the loss.
    const int64_t counted = stages_ && !stages_->holds_loss() ? 0 : tokens;
    at::Tensor global = at::tensor({counted, static_cast<int64_t>(ran_out)}, at::kLong);
    comm_->allreduce_sum(global);
    tokens = global[0].item<int64_t>();
    ran_out = global[1].item<int64_t>() > 0;
  }
  if (ran_out) {  // end_of_step normally sees this coming (not on resume, nor inside a step's micro-batches)
    if (batches.size() == 1)
      spdlog::info("the data has no batch left for step {}{}; the run ends at step {}", step,
                   batches.front().end_of_data ? "" : " on another rank", progress_.step);
    else
      spdlog::warn("the data ran out while drawing the micro-batches of step {} (grad_accum {}); that step is "
                   "dropped and the run ends at step {}", step, batches.size(), progress_.step);
    data_ran_out_ = true;
    return requests;
  }
  data_state_ = batches.back().data_state;

  // 2. Forward and backward; every token weighs the same across micro-batches.
  p_->gradient_writes.begin_step();  // each gradient's first pass writes over the last step's
  if (shards_) shards_->gather_root();  // the layers are gathered as the model reaches them
  at::Tensor loss_total = at::zeros({}, at::TensorOptions().device(device_));
  at::Tensor units_total;  // defined when the model reports its own units (ABI 1.2)
  int64_t tokens_before = 0;  // this rank's label tokens in the micro-batches before
  const double scale = 1.0 / static_cast<double>(std::max<int64_t>(tokens, 1));
  const StageRunner::Forward forward = [this](const Batch& b, const ModelInstance::LayerRange& layers) {
    const AutocastScope autocast(settings_.precision, device_);  // forward and loss only
    // The prefetcher already moved the batch to the device, so .to(device_) is a no-op;
    // under autocast the loss may come back in bf16, and it is summed in fp32.
    return p_->model.forward_layers(b.inputs.to(device_), b.targets.to(device_), b.fields, layers, data_source_);
  };
  if (stages_) {  // the schedule's passes over this rank's layers; the last stage holds the losses
    const std::vector<ForwardResult> outs = stages_->run(batches, scale, forward);
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].units.defined())
        throw runtime_failure("model " + p_->model.component().name + " reports its own loss units, which "
                              "[distributed] pipeline_parallel > 1 does not sum yet; use pipeline_parallel = 1");
      if (!outs[i].metrics.empty()) count_units(outs[i], batches[i], tokens_before, units_total);
      tokens_before += batches[i].tokens;
      loss_total += outs[i].loss_sum.detach().to(at::kFloat);
    }
  }
  for (size_t i = 0; i < batches.size() && !stages_; ++i) {
    const Batch& b = batches[i];
    // Its forward and backward; scale_on_device (run.cuda_graph's) gives the same fp32 product.
    const MicroBatchGraphs::Pass passes = [&, last = i + 1 == batches.size()](const Batch& in,
                                                                            const at::Tensor& scale_on_device) {
      ForwardResult out = forward(in, ModelInstance::LayerRange{});
      out.loss_sum = out.loss_sum.to(at::kFloat);
      if (grad_sync_ && last) grad_sync_->arm();  // communicate on the last only
      if (p_->offload && last && !graphs_) p_->offload->arm();  // pieces to the host during it
      if (shards_) shards_->begin_backward();
      (scale_on_device.defined() ? out.loss_sum * scale_on_device : out.loss_sum * scale).backward();
      out.loss_sum = out.loss_sum.detach();
      return out;
    };
    std::optional<ForwardResult> graphed = graphs_ ? graphs_->run(b, scale, i, step, passes) : std::nullopt;
    const ForwardResult out = graphed ? std::move(*graphed) : passes(b, at::Tensor());
    if (out.units.defined() || !out.metrics.empty()) count_units(out, b, tokens_before, units_total);
    tokens_before += b.tokens;
    loss_total += out.loss_sum;
  }

  // 3. Sum gradients and losses across ranks; the mean loss and the grad norm stay on the device.
  p_->gradient_writes.end_passes();  // before any bucket still waiting is reduced
  if (comm_) {
    overlap_sum_ += grad_sync_->finish();
    comm_->allreduce_sum(loss_total);
  }
  if (p_->sparse_optimizer) p_->sparse.collect(comm_.get());  // (row, value) pairs, summed across ranks
  if (units_total.defined()) {  // the model's units: rescale what was divided by tokens
    if (comm_) comm_->allreduce_sum(units_total);
    const at::Tensor correction = static_cast<double>(std::max<int64_t>(tokens, 1)) / units_total;
    p_->flat.scale_grads(correction);
    if (p_->offload) p_->offload->disarm();  // what went to the host during the backward is stale
    p_->sparse.scale(correction);
    loss_total = loss_total * correction.to(loss_total.scalar_type());
  }
  at::Tensor norm = gradient_norm();
  if (const at::Tensor sparse_squares = p_->sparse.square_sum(); sparse_squares.defined())
    norm = (norm.to(at::kFloat).square() + sparse_squares.to(norm.device())).sqrt();
  step_values_.add(loss_total * scale, norm);
  if (read_every_step_) {
    read_step_values();
  } else {  // on the device until a log step reads them; hooks see "not known" (loom_state_view)
    progress_.loss = std::numeric_limits<double>::quiet_NaN();
    progress_.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
  merge_control(requests, fire(LOOM_EVENT_AFTER_BACKWARD));

  // 4. Clip, schedule, let hooks veto, step.
  at::Tensor clip;
  if (settings_.clip_grad_norm > 0) {
    clip = clip_factor(norm, settings_.clip_grad_norm);
    if (!p_->offload) p_->flat.scale_grads(clip);  // offloaded: the host copies take the same product
    p_->sparse.scale(clip);
  }
  const double schedule_factor = p_->schedule.factor(step);
  progress_.lr = p_->optimizer.base_lr() * schedule_factor;
  const loom_control veto = fire(LOOM_EVENT_BEFORE_OPTIMIZER_STEP);
  merge_control(requests, veto);
  if (veto.skip_step) {
    ++summary_.skipped_steps;
    if (p_->offload) p_->offload->disarm();
  } else {
    if (p_->offload)  // the gradients to the host copy it updates, clipped there, piece by piece where it can
      p_->offload->step(p_->optimizer.updates_pieces(), clip, [&](const OptimizerOffload::Piece& piece) {
        p_->optimizer.step_range(progress_.lr, step, piece.group, piece.begin, piece.end);
      });
    else
      p_->optimizer.step(progress_.lr, step);
    if (p_->sparse_optimizer)
      p_->sparse_optimizer->sparse_step(p_->sparse_optimizer->base_lr() * schedule_factor, step, p_->sparse.grads());
  }
  if (grad_sync_) grad_sync_->gather_params();  // sharded: each rank updated only its slice
  if (shards_) shards_->after_step();

  // 5. The step is done: count it, then step_end.
  progress_.step = step;
  progress_.tokens += tokens;
  summary_.steps += 1;
  window_.add_step(tokens);
  merge_control(requests, fire(LOOM_EVENT_STEP_END));
  return requests;
}

void Trainer::read_step_values() {
  if (!step_values_.pending()) return;
  const StepValues::Read read = step_values_.read();
  progress_.loss = read.last_loss;
  progress_.grad_norm = read.last_grad_norm;
  summary_.nonfinite_steps += read.nonfinite_steps;
  window_.add_loss_sum(read.loss_sum);
}

Batch Trainer::next_batch(Prefetcher& prefetch, loom_control& requests) {
  Batch b = prefetch.pop();
  while (b.end_of_epoch) {
    data_state_ = b.data_state;  // the position after the end: resume starts the next epoch
    merge_control(requests, fire(LOOM_EVENT_EPOCH_END));
    progress_.epoch += 1;
    epoch_ended_ = true;
    merge_control(requests, fire(LOOM_EVENT_EPOCH_BEGIN));
    b = prefetch.pop();
  }
  return b;
}

loom_control Trainer::finish_data(Prefetcher& prefetch) {
  loom_control requests{};
  requests.struct_size = sizeof(requests);
  while (prefetch.front_is_epoch_end()) {
    const Batch b = prefetch.pop();
    data_state_ = b.data_state;
    merge_control(requests, fire(LOOM_EVENT_EPOCH_END));
    progress_.epoch += 1;
    epoch_ended_ = true;
  }
  return requests;
}

void Trainer::finish_last_epoch(Prefetcher& prefetch) {
  Batch b = prefetch.pop();
  if (!b.end_of_epoch) return;  // grad_accum rounded the steps up into the next epoch
  data_state_ = b.data_state;
  fire(LOOM_EVENT_EPOCH_END);
  progress_.epoch += 1;
}

int64_t Trainer::micro_batches_per_step(const Batch& first) {
  if (settings_.global_batch_size <= 0) return settings_.grad_accum;
  if (derived_accum_ > 0) return derived_accum_;
  // Ranks that share batches (tensor and sequence groups) count once.
  const int64_t rows = first.inputs.size(0), per_step = rows * mesh_.data();
  if (settings_.global_batch_size % per_step != 0)
    throw usage_failure("[run] global_batch_size " + std::to_string(settings_.global_batch_size) +
                        " is not a multiple of " + std::to_string(rows) + " rows per micro-batch x data-parallel "
                        "ranks " + std::to_string(mesh_.data()) + " = " + std::to_string(per_step) +
                        "; change global_batch_size or the data's batch size");
  derived_accum_ = settings_.global_batch_size / per_step;
  spdlog::info("global_batch_size {} = {} rows x {} data-parallel ranks x grad_accum {}", settings_.global_batch_size,
               rows, mesh_.data(), derived_accum_);
  return derived_accum_;
}

void Trainer::count_units(const ForwardResult& out, const Batch& b, int64_t tokens_before, at::Tensor& units_total) {
  const auto on_device = at::TensorOptions().device(device_).dtype(at::kDouble);
  const at::Tensor units =
      out.units.defined() ? out.units.to(device_) : at::full({}, static_cast<double>(b.tokens), on_device);
  if (out.units.defined() && !units_total.defined())
    units_total = at::full({}, static_cast<double>(tokens_before), on_device);
  if (units_total.defined()) units_total += units;
  model_metrics_.add(out.metrics, units);
}

at::Tensor Trainer::gradient_norm() {
  if (!tensor_parallel_) return grad_sync_ ? grad_sync_->grad_norm() : p_->flat.grad_norm();
  const at::Tensor sums = grad_sync_ ? grad_sync_->square_sums(whole_params_)
                                     : at::stack({p_->flat.owned_grad_square_sum(), p_->flat.owned_grad_square_sum(whole_params_)});
  return tensor_parallel_->grad_norm_from(sums[0], sums[1]);
}

}  // namespace loom
