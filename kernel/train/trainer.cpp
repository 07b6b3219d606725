// trainer.cpp: the training loop of docs/design.md "One training step". run() reads top to
// bottom; each phase is one method below it, in the order a step runs them.
#include "train/periodic_export.hpp"
#include "train/trainer.hpp"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>

#include "base/failure.hpp"
#include "base/signals.hpp"
#include "train/factories.hpp"
#include "train/device.hpp"
#include "train/events.hpp"
#include "train/log_window.hpp"
#include "train/model_metrics.hpp"
#include "train/prefetcher.hpp"
#include "train/progress.hpp"
#include "train/run_state.hpp"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// resume: continue an interrupted run exactly (data position, counters, trackers' state).
// rollback: a hook undoes a bad stretch: weights, optimizer and RNG go back to the checkpoint,
// the data goes on from where it is, so the batches that caused the trouble are not replayed.
enum class Restore { resume, rollback };

class Trainer {
 public:
  Trainer(const RunPlan& plan, const std::string& run_dir, const DistEnv& env, const std::function<void()>& ranks_met)
      : plan_(plan),
        settings_(plan.run),
        device_(resolve_device(settings_.device, env.local_rank, settings_.device_at)),
        run_dir_(run_dir) {
    apply_run_settings(settings_, device_, env.local_world_size);
    comm_ = build_communicator(plan, env, device_);
    ranks_met();
    RunContext context;
    context.run_dir = run_dir;
    context.device = device_.str();
    context.seed = static_cast<uint64_t>(settings_.seed);
    context.rank = env.rank;
    context.world_size = env.world_size;
    context.total_steps = settings_.steps;
    p_ = std::make_unique<Pipeline>(plan, context);
    grad_sync_ = build_gradient_sync(plan, *p_, comm_.get());
    shards_ = build_parameter_shards(plan, *p_, comm_.get(), device_);
    events_ = std::make_unique<EventBus>(p_->hooks);
    evaluator_ = build_evaluator(plan, *p_, device_, comm_.get());
    checkpoints_ = build_checkpoints(plan, *p_, run_dir);
    if (plan.hf_export.enabled && env.rank == 0)
      exporter_ = std::make_unique<PeriodicExport>(plan.hf_export, run_dir, p_->model, plan.lora);
    spdlog::info("model {}: {}; data {}; optimizer {}; schedule {}", p_->model.component().name,
                 p_->frozen.frozen > 0 ? p_->frozen.describe()
                                       : std::to_string(p_->flat.numel() + p_->sparse.numel()) + " parameters",
                 p_->data.component().name, p_->optimizer.component().name, p_->schedule.component().name);
    for (const FrozenSummary::Match& m : p_->frozen.matches)
      spdlog::info("[model] freeze \"{}\": {}", m.pattern, m.first_names);
    if (p_->sparse_optimizer)
      spdlog::info("{} sparse tables ({} rows of parameters, {:.1f} MiB) outside the flat buffers, updated by "
                   "[sparse_optimizer] {} on the rows each step touches",
                   p_->sparse.abi().sparse_table_count, p_->sparse.numel(),
                   static_cast<double>(p_->sparse.bytes()) / (1 << 20), p_->sparse_optimizer->component().name);
    log_state_bytes();
    mfu_ = build_mfu_baseline(p_->model, settings_, device_);
    data_source_ = "[data] " + p_->data.component().name;
    progress_.total_steps = p_->steps;
    if (comm_ && settings_.epochs > 0) {  // shards of different lengths: every rank stops at the same step
      at::Tensor fewest = at::full({1}, -progress_.total_steps, at::kLong);
      comm_->allreduce_max(fewest);
      progress_.total_steps = -fewest.item<int64_t>();
    }
  }

  TrainSummary run() {
    const auto started = Clock::now();
    SignalWatch signals(checkpoints_ != nullptr);
    try {
      if (const auto path = checkpoints_ ? checkpoints_->find_resume() : std::nullopt) restore(*path, Restore::resume);
      if (progress_.step >= progress_.total_steps) {
        spdlog::info("the run is already complete at step {} of {}; raise run.steps or run.epochs to train further",
                     progress_.step, progress_.total_steps);
        summary_.already_complete = true;
        finish_trackers(LOOM_RUN_FINISHED, "");
        return summary_;
      }
      p_->model.set_training(true);
      Prefetcher prefetch(p_->data, static_cast<size_t>(2 * settings_.grad_accum), device_);
      const double elapsed_before = progress_.elapsed_s;
      bool stop = fire(LOOM_EVENT_TRAIN_BEGIN).request_stop != 0;
      while (!stop && progress_.step < progress_.total_steps) {
        const loom_control requests = train_step(prefetch);
        if (data_ran_out_) break;  // mid-step: see train_step
        progress_.elapsed_s = elapsed_before + seconds_since(started);
        stop = end_of_step(requests, prefetch);
      }
      if (settings_.epochs > 0 && !stop) finish_last_epoch(prefetch);
      if (checkpoints_ && plan_.checkpoint.at_end && last_saved_step_ != progress_.step) save();
      if (checkpoints_) checkpoints_->wait();
      if (exporter_) exporter_->at_end(progress_.step);
      fire(LOOM_EVENT_TRAIN_END);
      check_not_diverged();
      finish_trackers(SignalWatch::requested() != 0 ? LOOM_RUN_INTERRUPTED : LOOM_RUN_FINISHED, "");
    } catch (const Failure& f) {
      events_->fire_exception(state_view(), f.what());
      finish_trackers_after_failure(f.what());
      throw;
    } catch (const c10::Error& e) {
      const std::string message = std::string("LibTorch error: ") + e.what_without_backtrace();
      events_->fire_exception(state_view(), message.c_str());
      finish_trackers_after_failure(message);
      throw runtime_failure(message);
    }
    summary_.seconds = seconds_since(started);
    return summary_;
  }

 private:
  // A run whose last step's loss is NaN or infinite did not succeed, whatever hooks did.
  void check_not_diverged() const {
    if (summary_.steps == 0 || std::isfinite(progress_.loss)) return;  // progress_: the last step's own loss
    throw runtime_failure("training diverged: the loss of the last step (" + std::to_string(progress_.step) +
                          ") is " + std::to_string(progress_.loss) + "; " +
                          std::to_string(summary_.nonfinite_steps) + " of " + std::to_string(summary_.steps) +
                          " steps had a non-finite loss. Lower the learning rate, set run.clip_grad_norm or add the "
                          "nan_guard hook; the checkpoints with a finite loss are kept");
  }

  void finish_trackers(loom_run_outcome outcome, const std::string& message) {
    for (auto& tracker : p_->trackers) tracker.finish(outcome, progress_.step, message);
  }
  // On the way out with an error: a tracker failing now must not hide that error.
  void finish_trackers_after_failure(const std::string& message) noexcept {
    try {
      finish_trackers(LOOM_RUN_FAILED, message);
    } catch (const std::exception& e) {
      spdlog::warn("a tracker could not record the failure: {}", e.what());
    }
  }

  // What each rank holds for the model between steps, so the effect of [distributed] shard
  // shows in the first lines of a run (tools/bench/shard_bench reads them).
  void log_state_bytes() {
    int64_t params = 0, grads = 0, state = 0;
    for (const at::Tensor& buffer : p_->flat.param_buffers()) params += static_cast<int64_t>(buffer.nbytes());
    grads = params;
    if (comm_ && p_->flat.reduces_to_owner()) {  // the rest is given back as its reduce finishes
      grads = 0;
      for (const OwnedSlice& s : p_->flat.owned_slices()) grads += s.length * p_->flat.param_buffers()[0].element_size();
    }
    if (shards_) params = shards_->resident_param_bytes();
    for (const auto& st : p_->optimizer.state()) state += static_cast<int64_t>(st.tensor->nbytes());
    params += p_->sparse.bytes();
    if (p_->sparse_optimizer)
      for (const auto& st : p_->sparse_optimizer->state()) state += static_cast<int64_t>(st.tensor->nbytes());
    int64_t frozen = 0;  // outside the flat buffers, whole on every rank
    for (const ModelParam& param : p_->model.params())
      if (param.frozen) frozen += static_cast<int64_t>(param.tensor->nbytes());
    const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
    spdlog::info("held per rank between steps: parameters {:.1f} MiB, gradients {:.1f} MiB, optimizer state {:.1f} MiB"
                 "{} (shard {}, {} rank{})",
                 mib(params), mib(grads), mib(state), frozen > 0 ? fmt::format(", frozen weights {:.1f} MiB", mib(frozen)) : "",
                 shard_mode_name(p_->flat.shard().mode), world_size(), world_size() == 1 ? "" : "s");
  }

  // One optimizer step (progress_.step + 1); returns the hooks' merged requests.
  loom_control train_step(Prefetcher& prefetch) {
    const int64_t step = progress_.step + 1;
    const auto step_started = Clock::now();
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
      at::Tensor global = at::tensor({tokens, static_cast<int64_t>(ran_out)}, at::kLong);
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
    p_->flat.zero_grad();
    if (shards_) shards_->gather_root();  // the layers are gathered as the model reaches them
    at::Tensor loss_total = at::zeros({}, at::TensorOptions().device(device_));
    at::Tensor units_total;  // defined when the model reports its own units (ABI 1.2)
    int64_t tokens_before = 0;  // this rank's label tokens in the micro-batches before
    const double scale = 1.0 / static_cast<double>(std::max<int64_t>(tokens, 1));
    for (size_t i = 0; i < batches.size(); ++i) {
      const Batch& b = batches[i];
      ForwardResult out;
      {
        const AutocastScope autocast(settings_.precision, device_);  // forward and loss only
        // The prefetcher already moved the batch to the device, so .to(device_) is a no-op;
        // under autocast the loss may come back in bf16, and it is summed in fp32.
        out = p_->model.forward(b.inputs.to(device_), b.targets.to(device_), b.fields, data_source_);
      }
      const at::Tensor loss = out.loss_sum.to(at::kFloat);
      if (out.units.defined() || !out.metrics.empty()) count_units(out, b, tokens_before, units_total);
      tokens_before += b.tokens;
      if (grad_sync_ && i + 1 == batches.size()) grad_sync_->arm();  // communicate on the last only
      if (shards_) shards_->begin_backward();
      (loss * scale).backward();
      loss_total += loss.detach();
    }

    // 3. Sum gradients and losses across ranks; then one host sync: mean loss and grad norm.
    if (comm_) {
      overlap_sum_ += grad_sync_->finish();
      comm_->allreduce_sum(loss_total);
    }
    if (p_->sparse_optimizer) p_->sparse.collect(comm_.get());  // (row, value) pairs, summed across ranks
    if (units_total.defined()) {  // the model's units: rescale what was divided by tokens
      if (comm_) comm_->allreduce_sum(units_total);
      const at::Tensor correction = static_cast<double>(std::max<int64_t>(tokens, 1)) / units_total;
      p_->flat.scale_grads(correction);
      p_->sparse.scale(correction);
      loss_total = loss_total * correction.to(loss_total.scalar_type());
    }
    at::Tensor norm = grad_sync_ ? grad_sync_->grad_norm() : p_->flat.grad_norm();
    if (const at::Tensor sparse_squares = p_->sparse.square_sum(); sparse_squares.defined())
      norm = (norm.to(at::kFloat).square() + sparse_squares.to(norm.device())).sqrt();
    const at::Tensor stats = at::stack({loss_total * scale, norm.to(loss_total.dtype())}).to(at::kCPU, at::kDouble);
    progress_.loss = stats[0].item<double>();
    progress_.grad_norm = stats[1].item<double>();
    merge_control(requests, fire(LOOM_EVENT_AFTER_BACKWARD));

    // 4. Clip, schedule, let hooks veto, step.
    if (settings_.clip_grad_norm > 0) {
      const at::Tensor factor = clip_factor(norm, settings_.clip_grad_norm);
      p_->flat.scale_grads(factor);
      p_->sparse.scale(factor);
    }
    const double schedule_factor = p_->schedule.factor(step);
    progress_.lr = p_->optimizer.base_lr() * schedule_factor;
    const loom_control veto = fire(LOOM_EVENT_BEFORE_OPTIMIZER_STEP);
    merge_control(requests, veto);
    if (veto.skip_step) {
      ++summary_.skipped_steps;
    } else {
      p_->optimizer.step(progress_.lr, step);
      if (p_->sparse_optimizer)
        p_->sparse_optimizer->sparse_step(p_->sparse_optimizer->base_lr() * schedule_factor, step, p_->sparse.grads());
    }
    if (grad_sync_) grad_sync_->gather_params();  // sharded: each rank updated only its slice
    if (shards_) shards_->after_step();

    // 5. The step is done: count it, then step_end.
    progress_.step = step;
    progress_.tokens += tokens;
    summary_.nonfinite_steps += std::isfinite(progress_.loss) ? 0 : 1;
    summary_.steps += 1;
    window_.add_step(tokens, progress_.loss);
    merge_control(requests, fire(LOOM_EVENT_STEP_END));
    const double seconds = seconds_since(step_started);
    step_seconds_ema_ = summary_.steps == 1 ? seconds : 0.9 * step_seconds_ema_ + 0.1 * seconds;
    return requests;
  }

  // The next batch to train on. An epoch a finite dataset ends on the way fires epoch_end and
  // epoch_begin, whose requests join the step's.
  Batch next_batch(Prefetcher& prefetch, loom_control& requests) {
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

  // This rank's data ends after this step: the window ends still queued before the end fire
  // epoch_end (an evaluation after the last window), as a step drawing past them would.
  loom_control finish_data(Prefetcher& prefetch) {
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

  // A run by epochs has drawn its last epoch's last batch; the dataset's end of that epoch
  // follows in the queue. Taking it fires epoch_end (no epoch_begin: no epoch follows), so the
  // count and the saved data position include it.
  void finish_last_epoch(Prefetcher& prefetch) {
    Batch b = prefetch.pop();
    if (!b.end_of_epoch) return;  // grad_accum rounded the steps up into the next epoch
    data_state_ = b.data_state;
    fire(LOOM_EVENT_EPOCH_END);
    progress_.epoch += 1;
  }

  // run.grad_accum, or what run.global_batch_size makes of the first micro-batch's rows.
  int64_t micro_batches_per_step(const Batch& first) {
    if (settings_.global_batch_size <= 0) return settings_.grad_accum;
    if (derived_accum_ > 0) return derived_accum_;
    const int64_t rows = first.inputs.size(0), per_step = rows * world_size();
    if (settings_.global_batch_size % per_step != 0)
      throw usage_failure("[run] global_batch_size " + std::to_string(settings_.global_batch_size) +
                          " is not a multiple of " + std::to_string(rows) + " rows per micro-batch x world size " +
                          std::to_string(world_size()) + " = " + std::to_string(per_step) +
                          "; change global_batch_size or the data's batch size");
    derived_accum_ = settings_.global_batch_size / per_step;
    spdlog::info("global_batch_size {} = {} rows x {} ranks x grad_accum {}", settings_.global_batch_size, rows,
                 world_size(), derived_accum_);
    return derived_accum_;
  }

  // A micro-batch whose model reported units or metrics: its units join the step's total
  // (units_total stays undefined while no model reports units), its metrics the log window.
  void count_units(const ForwardResult& out, const Batch& b, int64_t tokens_before, at::Tensor& units_total) {
    const auto on_device = at::TensorOptions().device(device_).dtype(at::kDouble);
    const at::Tensor units =
        out.units.defined() ? out.units.to(device_) : at::full({}, static_cast<double>(b.tokens), on_device);
    if (out.units.defined() && !units_total.defined())
      units_total = at::full({}, static_cast<double>(tokens_before), on_device);
    if (units_total.defined()) units_total += units;
    model_metrics_.add(out.metrics, units);
  }

  // After each step: what the hooks asked for and the signals received, agreed across ranks,
  // in a fixed order: roll back, evaluate, log, save. Returns whether the run stops.
  bool end_of_step(loom_control requests, Prefetcher& prefetch) {
    bool signalled = SignalWatch::requested() != 0;
    // A finite stream (ABI 1.7) with no batch for another step: its queued window ends fire
    // first, so what their hooks ask for (an evaluation) joins the agreement below.
    bool data_ends = prefetch.data_ends_next();
    if (data_ends) merge_control(requests, finish_data(prefetch));
    bool epoch_save = plan_.checkpoint.every_epoch && epoch_ended_;
    if (comm_) agree(requests, signalled, epoch_save, data_ends);  // every rank takes the same branches below
    if (data_ends)
      spdlog::info("the data has no batch left after step {}{}; the run ends here", progress_.step,
                   comm_ ? " on at least one rank" : "");
    if (requests.request_rollback) {
      roll_back();
      return false;
    }
    const int64_t step = progress_.step;
    bool stop = requests.request_stop || signalled || data_ends;
    if (requests.request_eval) stop |= evaluate();
    if (step % settings_.log_every == 0 || step == progress_.total_steps || stop) stop |= log();
    else if (!eval_metrics_.empty()) log_to_trackers(eval_metrics_);
    eval_metrics_.clear();
    if (checkpoints_ && (checkpoints_->due(step) || requests.request_save || signalled || epoch_save)) save();
    if (exporter_) exporter_->after_step(step);
    if (signalled)
      spdlog::info("stopping after step {} on signal {}{}", step, SignalWatch::requested(),
                   checkpoints_ ? "" : "; nothing saved: the manifest has no [checkpoint] table");
    return stop;
  }

  // Loads a checkpoint into the live run (see Restore).
  void restore(const std::filesystem::path& path, Restore mode) {
    const LoadedCheckpoint loaded = checkpoints_->load(path);
    const RestoredRun restored = read_restored_run(loaded, path.string());
    if (mode == Restore::resume) {
      for (const auto& change :
           plan_.manifest_changes(restored.resolved_manifest, path.string(), restored.world_size, world_size()))
        spdlog::info("resume: manifest changed: {}", change);
    }
    restore_tensors(*p_, loaded, path.string(), {plan_.checkpoint.allow_nonfinite, plan_.checkpoint.allow_unclaimed});
    if (shards_) shards_->release_all();  // the whole weights were written; keep this rank's slices
    if (mode == Restore::resume) {
      data_state_ = data_state_for_this_rank(restored, path.string());
      if (p_->data.has_state()) p_->data.load_state(data_state_);
      else spdlog::warn("dataset {} keeps no position: resumed batches differ from an uninterrupted run",
                        p_->data.component().name);
      progress_.elapsed_s = restored.elapsed_s;
      progress_.epoch = restored.epoch;
    } else {
      spdlog::warn("rolled back from step {} to {}; the data goes on with new batches", progress_.step,
                   restored.step);
    }
    last_saved_step_ = restored.step;  // that checkpoint exists: ending here saves nothing new
    progress_.step = restored.step;
    progress_.tokens = restored.tokens;
    for (auto& tracker : p_->trackers) tracker.resume(progress_.step);  // drop what the lost steps logged
    if (mode == Restore::resume) {
      const std::string note = "resumed from " + path.string() + " at step " + std::to_string(progress_.step);
      spdlog::info("{}", note);
      for (auto& tracker : p_->trackers) tracker.note(note);
    }
    fire(LOOM_EVENT_LOAD);
  }

  // This rank's data position. Resuming at another world size (the weights and optimizer
  // state reshard exactly) works when every rank saved the same position, as datasets that
  // deal out a global sample order do (synthetic, token_file); then each new rank takes it.
  std::string data_state_for_this_rank(const RestoredRun& restored, const std::string& origin) const {
    if (restored.world_size == world_size()) return restored.data_states.at(static_cast<size_t>(rank()));
    const auto& states = restored.data_states;
    if (std::adjacent_find(states.begin(), states.end(), std::not_equal_to<>()) != states.end())
      throw usage_failure(origin + ": written by a run of world size " + std::to_string(restored.world_size) +
                          ", but this run has " + std::to_string(world_size()) + ", and dataset " +
                          p_->data.component().name +
                          " saved a different position on each rank, which cannot be dealt out to another number of "
                          "ranks; resume with " + std::to_string(restored.world_size) + " ranks, or start a new run");
    spdlog::info("resume: world size {} -> {}; weights and optimizer state resharded, every rank continues at the "
                 "saved data position", restored.world_size, world_size());
    return states.front();
  }

  // A hook asked to undo a bad stretch (nan_guard action = "rollback").
  void roll_back() {
    if (!checkpoints_) throw runtime_failure("a hook requested a rollback, but the manifest has no [checkpoint]");
    checkpoints_->wait();
    const auto path = checkpoints_->find_latest();
    if (!path) throw runtime_failure("a hook requested a rollback at step " + std::to_string(progress_.step) +
                                     ", but there is no valid checkpoint yet; save earlier ([checkpoint] every)");
    restore(*path, Restore::rollback);
  }

  // Evaluates on [eval_data], keeps the metrics for this step's tracker record and fires
  // eval_end; returns whether a hook asked to stop (early stopping).
  bool evaluate() {
    if (!evaluator_) {
      if (!warned_no_eval_data_) spdlog::warn("a hook asked for evaluation, but the manifest has no [eval_data]");
      warned_no_eval_data_ = true;
      return false;
    }
    if (shards_) shards_->gather_root();
    eval_metrics_ = evaluator_->run(p_->model);
    if (shards_) shards_->release_all();
    std::string reported;  // what the model reported beyond the loss (eval_auc, ...)
    for (size_t i = 3; i < eval_metrics_.size(); ++i)
      reported += fmt::format(", {} {:.4f}", eval_metrics_[i].first.substr(5), eval_metrics_[i].second);
    spdlog::info("eval at step {}: loss {:.4f}, perplexity {:.2f}{}", progress_.step, eval_metrics_[0].second,
                 eval_metrics_[1].second, reported);
    const MetricsView view(progress_.step, eval_metrics_);
    return fire(LOOM_EVENT_EVAL_END, view.get()).request_stop != 0;
  }

  // Hands the window's metrics (and this step's evaluation) to trackers, then fires log;
  // returns whether a hook asked to stop. One record per step: trackers never see a step twice.
  bool log() {
    const int64_t window_steps = window_.steps();
    MetricList metrics = window_.finish(progress_, step_seconds_ema_, mfu_.flops_per_token, mfu_.peak_flops);
    const double logged_loss = metrics.front().second;  // LogWindow puts "loss" first
    if (!logged_once_) summary_.first_loss = logged_loss;
    logged_once_ = true;
    summary_.last_loss = logged_loss;
    if (comm_) metrics.emplace_back("buckets_started_in_backward", overlap_sum_ / static_cast<double>(window_steps));
    overlap_sum_ = 0;
    if (summary_.skipped_steps > 0) metrics.emplace_back("skipped_steps", static_cast<double>(summary_.skipped_steps));
    const MetricList reported = model_metrics_.finish(comm_.get(), window_steps);
    metrics.insert(metrics.end(), reported.begin(), reported.end());
    metrics.insert(metrics.end(), eval_metrics_.begin(), eval_metrics_.end());
    const MetricsView view(progress_.step, metrics);
    for (auto& tracker : p_->trackers) tracker.log(view);
    return fire(LOOM_EVENT_LOG, view.get()).request_stop != 0;
  }

  void log_to_trackers(const MetricList& metrics) {
    const MetricsView view(progress_.step, metrics);
    for (auto& tracker : p_->trackers) tracker.log(view);
  }

  // Every rank takes part (their data positions are gathered). Rank 0 writes, or, sharded,
  // every rank writes its own part.
  void save() {
    // A diverged model is not worth a checkpoint, and saving it would rotate good ones out.
    // Every rank sees the same (all-reduced) loss, so all skip together.
    if (!std::isfinite(progress_.loss)) {
      spdlog::warn("not saving a checkpoint at step {}: its loss is {}; the earlier checkpoints are kept",
                   progress_.step, progress_.loss);
      return;
    }
    const std::vector<std::string> data_states = comm_ ? comm_->allgather_bytes(data_state_)
                                                       : std::vector<std::string>{data_state_};
    if (comm_ && p_->flat.sharded())
      checkpoints_->save_part(capture_shard_part(*p_, progress_, data_states, plan_.resolved_manifest), *comm_,
                              std::chrono::milliseconds(static_cast<int64_t>(1e3 * plan_.distributed.timeout_s)));
    else if (rank() == 0)
      checkpoints_->save(capture_snapshot(*p_, progress_, data_states, plan_.resolved_manifest));
    last_saved_step_ = progress_.step;
    fire(LOOM_EVENT_SAVE);
  }

  // Ranks act on the union of their requests and signals, so none is left waiting alone.
  void agree(loom_control& requests, bool& signalled, bool& epoch_save, bool& data_ends) {
    at::Tensor flags = at::tensor({requests.request_stop, requests.request_save, requests.request_eval,
                                   requests.request_rollback, static_cast<int32_t>(signalled),
                                   static_cast<int32_t>(epoch_save), static_cast<int32_t>(data_ends)},
                                  at::kInt);
    comm_->allreduce_max(flags);
    requests.request_stop = flags[0].item<int32_t>();
    requests.request_save = flags[1].item<int32_t>();
    requests.request_eval = flags[2].item<int32_t>();
    requests.request_rollback = flags[3].item<int32_t>();
    signalled = flags[4].item<int32_t>() != 0;
    epoch_save = flags[5].item<int32_t>() != 0;
    data_ends = flags[6].item<int32_t>() != 0;
  }

  loom_control fire(loom_event event, const loom_metrics* metrics = nullptr) {
    return events_->fire(event, state_view(metrics));
  }
  loom_state_view state_view(const loom_metrics* metrics = nullptr) const {
    return progress_.view(run_dir_, rank(), world_size(), metrics);
  }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int world_size() const { return comm_ ? comm_->world_size() : 1; }

  const RunPlan& plan_;
  const RunSettings& settings_;
  const at::Device device_;
  const std::string run_dir_;
  std::unique_ptr<Communicator> comm_;  // null in a single-process run
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<GradientSync> grad_sync_;  // gradient all-reduce overlapping backward
  std::unique_ptr<ParameterShards> shards_;  // shard = "parameters": units gathered as they run
  std::unique_ptr<EventBus> events_;
  std::unique_ptr<Evaluator> evaluator_;            // null without [eval_data]
  std::unique_ptr<CheckpointManager> checkpoints_;  // after p_: joins its writer before the backend dies
  std::unique_ptr<PeriodicExport> exporter_;        // null without [export], and on ranks other than 0
  MfuBaseline mfu_;
  std::string data_source_;    // "[data] NAME": named when the model refuses a batch's fields
  Progress progress_;
  std::string data_state_;     // dataset position after the last batch consumed
  int64_t last_saved_step_ = -1;
  LogWindow window_;
  bool epoch_ended_ = false;    // an epoch ended during the current step
  bool data_ran_out_ = false;   // a finite stream ended inside a step (ABI 1.7)
  int64_t derived_accum_ = 0;   // from run.global_batch_size, once the first batch showed its rows
  ModelMetrics model_metrics_;  // what the model reported since the last log
  double overlap_sum_ = 0;     // fraction of buckets started during backward, summed over the window
  double step_seconds_ema_ = 0;
  MetricList eval_metrics_;    // this step's evaluation, until the step's tracker record
  bool warned_no_eval_data_ = false;
  TrainSummary summary_;
  bool logged_once_ = false;
};

}  // namespace

TrainSummary train(const RunPlan& plan, const std::string& run_dir, const DistEnv& env,
                   const std::function<void()>& ranks_met) {
  return Trainer(plan, run_dir, env, ranks_met).run();
}

}  // namespace loom
