#include "trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "checkpoint_manager.hpp"
#include "communicator.hpp"
#include "cpu_memory.hpp"
#include "device.hpp"
#include "grad_sync.hpp"
#include "evaluator.hpp"
#include "events.hpp"
#include "failure.hpp"
#include "peak_flops.hpp"
#include "pipeline.hpp"
#include "prefetcher.hpp"
#include "resume_check.hpp"
#include "run_state.hpp"
#include "signals.hpp"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Metrics accumulated between two log events.
struct LogWindow {
  Clock::time_point start = Clock::now();
  int64_t steps = 0, tokens = 0;
  double loss_sum = 0, data_seconds = 0;

  MetricList finish(const RunSettings& run, int64_t step, const loom_state_view& state, double seconds_per_step_ema,
                    double flops_per_token, double peak_flops) {
    const double seconds = seconds_since(start);
    const double tokens_per_s = tokens / std::max(seconds, 1e-9);
    MetricList m = {{"loss", loss_sum / steps},
                    {"lr", state.lr},
                    {"grad_norm", state.grad_norm},
                    {"tokens_per_s", tokens_per_s},
                    {"step_time_ms", 1e3 * seconds / steps},
                    {"data_time_ms", 1e3 * data_seconds / steps},
                    {"eta_s", seconds_per_step_ema * static_cast<double>(run.steps - step)},
                    {"tokens", static_cast<double>(state.tokens)}};
    if (flops_per_token > 0 && peak_flops > 0) m.emplace_back("mfu", flops_per_token * tokens_per_s / peak_flops);
    *this = LogWindow{};
    return m;
  }
};

// The loop of DESIGN.md "One training step", one method per phase.
class Trainer {
 public:
  Trainer(const PipelineConfig& config, const std::string& run_dir, const DistEnv& env)
      : config_(config),
        settings_(config.run),
        device_(resolve_device(settings_.device, env.local_rank, settings_.device_at)),
        run_dir_(run_dir),
        manifest_text_(to_toml_text(config.resolved)) {
    if (settings_.threads > 0) at::set_num_threads(static_cast<int>(settings_.threads));
    if (settings_.cpu_memory_cache) keep_freed_cpu_memory();
    apply_determinism(settings_.deterministic);
    apply_precision(settings_.precision, device_);
    spdlog::info("device {} ({}), precision {}", device_.str(), settings_.device, precision_name(settings_.precision));
    at::manual_seed(settings_.seed);  // dropout and anything else drawing from the default generator
    if (env.world_size > 1) {
      const bool nccl =
          config.distributed.backend == "nccl" || (config.distributed.backend == "auto" && device_.is_cuda());
      if (nccl && !Communicator::nccl_available())
        throw usage_failure("[distributed] backend nccl: this host was built without NCCL (no CUDA toolkit with NCCL "
                            "at build time); use backend = \"gloo\" with run.device = \"cpu\"");
      if (nccl && !device_.is_cuda())
        throw usage_failure("[distributed] backend nccl moves CUDA tensors; set run.device = \"cuda\" or use gloo");
      const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(1e3 * config.distributed.timeout_s));
      comm_ = std::make_unique<Communicator>(env, timeout, nccl, device_.has_index() ? device_.index() : 0);
      spdlog::info("rank {} of {} joined through {}:{} ({}, {})", env.rank, env.world_size, env.master_addr,
                   env.master_port, env.launcher, nccl ? "nccl" : "gloo");
    }
    const RunContext run{run_dir, device_.str(), settings_.seed, env.rank, env.world_size, settings_.steps};
    p_ = std::make_unique<Pipeline>(config, run);
    if (comm_) {  // every rank starts from rank 0's weights, whatever its own init drew
      for (at::Tensor buffer : p_->flat.param_buffers()) comm_->broadcast(buffer, 0);
      grad_sync_ = std::make_unique<GradientSync>(p_->model.params(), p_->flat, *comm_,
                                                  static_cast<int64_t>(config.distributed.bucket_mb * 1024 * 1024));
    }
    events_ = std::make_unique<EventBus>(p_->hooks);
    if (p_->eval_data)
      evaluator_ = std::make_unique<Evaluator>(*p_->eval_data, config.eval_max_batches, device_, settings_.precision,
                                               comm_.get());
    if (p_->checkpoint)
      checkpoints_ = std::make_unique<CheckpointManager>(config.checkpoint, *p_->checkpoint, *config.registry, run_dir);
    spdlog::info("model {}: {} parameters; data {}; optimizer {}; schedule {}", p_->model.component().name,
                 p_->flat.numel(), p_->data.component().name, p_->optimizer.component().name,
                 p_->schedule.component().name);
    flops_per_token_ = p_->model.flops_per_token();
    peak_flops_ = settings_.peak_flops;
    if (flops_per_token_ > 0 && peak_flops_ <= 0) {
      peak_flops_ = measure_peak_flops(device_);
      spdlog::info("MFU is reported against the fp32 GEMM peak measured now: {:.1f} GFLOP/s", peak_flops_ / 1e9);
    }
    const double nan = std::numeric_limits<double>::quiet_NaN();
    state_ = {sizeof(loom_state_view), 0, settings_.steps, 0, nan, nan, 0.0, 0, nullptr, run_dir_.c_str(),
              env.rank, env.world_size, nullptr};
  }

  TrainSummary run() {
    const auto started = Clock::now();
    SignalWatch signals;
    try {
      resume();
      if (counters_.step >= settings_.steps) {
        spdlog::info("the run is already complete at step {} of {}; raise run.steps to train further",
                     counters_.step, settings_.steps);
        return summary_;
      }
      p_->model.set_training(true);
      Prefetcher prefetch(p_->data, static_cast<size_t>(2 * settings_.grad_accum), device_);
      bool stop = events_->fire(LOOM_EVENT_TRAIN_BEGIN, state_).request_stop != 0;
      const double elapsed_before = counters_.elapsed_s;
      for (int64_t step = counters_.step + 1; step <= settings_.steps && !stop; ++step) {
        loom_control control = train_step(step, prefetch);
        counters_.elapsed_s = elapsed_before + seconds_since(started);
        bool signalled = SignalWatch::requested() != 0;
        if (comm_) agree(control, signalled);  // every rank takes the same branch below
        if (control.request_rollback) {
          roll_back();
          step = counters_.step;  // the loop goes on from the checkpoint's next step
          continue;
        }
        stop = control.request_stop || signalled;
        if (control.request_eval) stop |= evaluate(step);
        if (step % settings_.log_every == 0 || step == settings_.steps || stop) stop |= log(step);
        else if (!eval_metrics_.empty()) log_to_trackers(step, eval_metrics_);
        eval_metrics_.clear();
        if (checkpoints_ && (checkpoints_->due(step) || control.request_save || signalled)) save();
        if (signalled) spdlog::info("stopping after step {} on signal {}", step, SignalWatch::requested());
      }
      if (checkpoints_ && config_.checkpoint.at_end && last_saved_step_ != counters_.step) save();
      if (checkpoints_) checkpoints_->wait();
      events_->fire(LOOM_EVENT_TRAIN_END, state_);
    } catch (const Failure& f) {
      events_->fire_exception(state_, f.what());
      throw;
    } catch (const c10::Error& e) {
      const std::string message = std::string("LibTorch error: ") + e.what_without_backtrace();
      events_->fire_exception(state_, message.c_str());
      throw runtime_failure(message);
    }
    summary_.seconds = seconds_since(started);
    return summary_;
  }

 private:
  void resume() {
    if (!checkpoints_) return;
    const auto path = checkpoints_->find_resume();
    if (!path) return;
    const LoadedCheckpoint loaded = checkpoints_->load(*path);
    const RestoredRun restored = read_restored_run(loaded, path->string());
    for (const auto& change : check_resume_manifest(restored.resolved_manifest, manifest_text_, path->string()))
      spdlog::info("resume: manifest changed: {}", change);
    if (restored.world_size != world_size())
      throw usage_failure(path->string() + ": written by a run of world size " + std::to_string(restored.world_size) +
                          ", but this run has " + std::to_string(world_size()) +
                          "; resume with the same number of ranks, or start a new run");
    restore_tensors(*p_, loaded, path->string());
    if (p_->data.has_state()) p_->data.load_state(restored.data_states.at(static_cast<size_t>(rank())));
    else spdlog::warn("dataset {} keeps no position: resumed batches differ from an uninterrupted run",
                      p_->data.component().name);
    counters_ = restored.counters;
    for (auto& tracker : p_->trackers) tracker.resume(counters_.step);  // drop what the lost run logged later
    data_state_ = restored.data_states.at(static_cast<size_t>(rank()));
    state_.step = counters_.step;
    state_.tokens = counters_.tokens;
    const std::string note = "resumed from " + path->string() + " at step " + std::to_string(counters_.step);
    spdlog::info("{}", note);
    for (auto& tracker : p_->trackers) tracker.note(note);
    events_->fire(LOOM_EVENT_LOAD, state_);
  }

  // One optimizer step; returns the hooks' merged requests.
  loom_control train_step(int64_t step, Prefetcher& prefetch) {
    const auto step_started = Clock::now();
    loom_control requests = events_->fire(LOOM_EVENT_STEP_BEGIN, state_);

    // 1. Draw the micro-batches and count the tokens that carry loss.
    const auto data_started = Clock::now();
    std::vector<Batch> batches;
    int64_t tokens = 0;
    for (int64_t i = 0; i < settings_.grad_accum; ++i) {
      batches.push_back(prefetch.pop());
      tokens += batches.back().tokens;
    }
    window_.data_seconds += seconds_since(data_started);
    data_state_ = batches.back().data_state;
    if (comm_) {  // the global count, so every token weighs the same on every rank
      at::Tensor global = at::full({1}, tokens, at::kLong);
      comm_->allreduce_sum(global);
      tokens = global.item<int64_t>();
    }

    // 2. Forward and backward; every token weighs the same across micro-batches.
    p_->flat.zero_grad();
    at::Tensor loss_total = at::zeros({}, at::TensorOptions().device(device_));
    const double scale = 1.0 / static_cast<double>(std::max<int64_t>(tokens, 1));
    for (size_t i = 0; i < batches.size(); ++i) {
      const Batch& b = batches[i];
      at::Tensor loss;
      {
        const AutocastScope autocast(settings_.precision, device_);  // forward and loss only
        // The prefetcher already moved the batch to the device, so .to(device_) is a no-op;
        // under autocast the loss may come back in bf16, and it is summed in fp32.
        loss = p_->model.loss_sum(b.inputs.to(device_), b.targets.to(device_)).to(at::kFloat);
      }
      if (grad_sync_ && i + 1 == batches.size()) grad_sync_->arm();  // communicate on the last only
      (loss * scale).backward();
      loss_total += loss.detach();
    }

    // 3. Sum gradients and losses across ranks; then one host sync: mean loss and grad norm.
    if (comm_) {
      overlap_sum_ += grad_sync_->finish();
      comm_->allreduce_sum(loss_total);
    }
    const at::Tensor norm = p_->flat.grad_norm();
    const at::Tensor stats = at::stack({loss_total * scale, norm.to(loss_total.dtype())}).to(at::kCPU, at::kDouble);
    state_.loss = stats[0].item<double>();
    state_.grad_norm = stats[1].item<double>();
    merge_control(requests, events_->fire(LOOM_EVENT_AFTER_BACKWARD, state_));

    // 4. Clip, schedule, let hooks veto, step.
    if (settings_.clip_grad_norm > 0) p_->flat.clip(norm, settings_.clip_grad_norm);
    state_.lr = p_->optimizer.base_lr() * p_->schedule.factor(step);
    const loom_control veto = events_->fire(LOOM_EVENT_BEFORE_OPTIMIZER_STEP, state_);
    merge_control(requests, veto);
    if (veto.skip_step) ++summary_.skipped_steps;
    else p_->optimizer.step(state_.lr, step);

    // 5. Book-keeping and step_end.
    counters_.step = state_.step = step;
    counters_.tokens = state_.tokens += tokens;
    if (summary_.steps == 0) summary_.first_loss = state_.loss;
    summary_.last_loss = state_.loss;
    summary_.steps += 1;
    window_.steps += 1;
    window_.tokens += tokens;
    window_.loss_sum += state_.loss;
    merge_control(requests, events_->fire(LOOM_EVENT_STEP_END, state_));
    const double seconds = seconds_since(step_started);
    step_seconds_ema_ = summary_.steps == 1 ? seconds : 0.9 * step_seconds_ema_ + 0.1 * seconds;
    return requests;
  }

  void log_to_trackers(int64_t step, const MetricList& metrics) {
    const MetricsView view(step, metrics);
    for (auto& tracker : p_->trackers) tracker.log(view);
  }

  // Hands the window's metrics (and this step's evaluation) to trackers, then hooks; returns
  // whether a hook asked to stop. One record per step: trackers never see a step twice.
  bool log(int64_t step) {
    const int64_t window_steps = window_.steps;
    MetricList metrics = window_.finish(settings_, step, state_, step_seconds_ema_, flops_per_token_, peak_flops_);
    if (comm_) metrics.emplace_back("buckets_started_in_backward", overlap_sum_ / static_cast<double>(window_steps));
    overlap_sum_ = 0;
    if (summary_.skipped_steps > 0) metrics.emplace_back("skipped_steps", static_cast<double>(summary_.skipped_steps));
    metrics.insert(metrics.end(), eval_metrics_.begin(), eval_metrics_.end());
    const MetricsView view(step, metrics);
    for (auto& tracker : p_->trackers) tracker.log(view);
    state_.metrics = view.get();
    const bool stop = events_->fire(LOOM_EVENT_LOG, state_).request_stop != 0;
    state_.metrics = nullptr;
    return stop;
  }

  // A hook asked to undo a bad stretch (nan_guard action = "rollback"): back to the newest
  // checkpoint's weights, optimizer and RNG state, but the data goes on from where it is now,
  // so the batches that caused the trouble are not replayed.
  void roll_back() {
    if (!checkpoints_) throw runtime_failure("a hook requested a rollback, but the manifest has no [checkpoint]");
    checkpoints_->wait();
    const auto path = checkpoints_->find_latest();
    if (!path) throw runtime_failure("a hook requested a rollback at step " + std::to_string(counters_.step) +
                                     ", but there is no valid checkpoint yet; save earlier ([checkpoint] every)");
    const LoadedCheckpoint loaded = checkpoints_->load(*path);
    const RestoredRun restored = read_restored_run(loaded, path->string());
    restore_tensors(*p_, loaded, path->string());
    spdlog::warn("rolled back from step {} to {}; the data goes on with new batches", counters_.step,
                 restored.counters.step);
    counters_.step = state_.step = restored.counters.step;
    counters_.tokens = state_.tokens = restored.counters.tokens;
    last_saved_step_ = counters_.step;
    for (auto& tracker : p_->trackers) tracker.resume(counters_.step);
    events_->fire(LOOM_EVENT_LOAD, state_);
  }

  // Evaluates on [eval_data], hands the metrics to trackers and fires eval_end; returns whether
  // a hook asked to stop (early stopping).
  bool evaluate(int64_t step) {
    if (!evaluator_) {
      if (!warned_no_eval_data_) spdlog::warn("a hook asked for evaluation, but the manifest has no [eval_data]");
      warned_no_eval_data_ = true;
      return false;
    }
    eval_metrics_ = evaluator_->run(p_->model);  // trackers get them with this step's record
    spdlog::info("eval at step {}: loss {:.4f}, perplexity {:.2f}", step, eval_metrics_[0].second,
                 eval_metrics_[1].second);
    const MetricsView view(step, eval_metrics_);
    state_.metrics = view.get();
    const bool stop = events_->fire(LOOM_EVENT_EVAL_END, state_).request_stop != 0;
    state_.metrics = nullptr;
    return stop;
  }

  // Every rank takes part (their data positions are gathered); rank 0 writes.
  void save() {
    const std::vector<std::string> data_states = comm_ ? comm_->allgather_bytes(data_state_)
                                                       : std::vector<std::string>{data_state_};
    if (rank() == 0) checkpoints_->save(capture_snapshot(*p_, counters_, data_states, manifest_text_));
    last_saved_step_ = counters_.step;
    events_->fire(LOOM_EVENT_SAVE, state_);
  }

  // Ranks act on the union of their requests and signals, so none is left waiting alone.
  void agree(loom_control& control, bool& signalled) {
    at::Tensor flags = at::tensor({control.request_stop, control.request_save, control.request_eval,
                                   control.request_rollback, static_cast<int32_t>(signalled)},
                                  at::kInt);
    comm_->allreduce_max(flags);
    control.request_stop = flags[0].item<int32_t>();
    control.request_save = flags[1].item<int32_t>();
    control.request_eval = flags[2].item<int32_t>();
    control.request_rollback = flags[3].item<int32_t>();
    signalled = flags[4].item<int32_t>() != 0;
  }

  int rank() const { return comm_ ? comm_->rank() : 0; }
  int world_size() const { return comm_ ? comm_->world_size() : 1; }

  const PipelineConfig& config_;
  const RunSettings& settings_;
  const at::Device device_;
  const std::string run_dir_;
  const std::string manifest_text_;
  std::unique_ptr<Communicator> comm_;  // null in a single-process run
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<GradientSync> grad_sync_;  // gradient all-reduce overlapping backward
  double overlap_sum_ = 0;                  // fraction of buckets started during backward, summed
  std::unique_ptr<EventBus> events_;
  std::unique_ptr<Evaluator> evaluator_;            // null without [eval_data]
  bool warned_no_eval_data_ = false;
  MetricList eval_metrics_;  // this step's evaluation, until the step's tracker record
  int64_t last_saved_step_ = -1;
  std::unique_ptr<CheckpointManager> checkpoints_;  // after p_: joins its writer before the backend dies
  double flops_per_token_ = 0, peak_flops_ = 0;
  loom_state_view state_{};
  RunCounters counters_;
  std::string data_state_;  // dataset position after the last batch consumed
  LogWindow window_;
  double step_seconds_ema_ = 0;
  TrainSummary summary_;
};

}  // namespace

TrainSummary train(const PipelineConfig& config, const std::string& run_dir, const DistEnv& env) {
  return Trainer(config, run_dir, env).run();
}

}  // namespace loom
