#include "trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "compute_components.hpp"
#include "events.hpp"
#include "failure.hpp"
#include "flat_params.hpp"
#include "observer_components.hpp"
#include "peak_flops.hpp"
#include "prefetcher.hpp"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

at::Device resolve_device(const std::string& name) {
  at::Device device(at::kCPU);
  try {
    device = at::Device(name == "cuda" ? std::string("cuda:0") : name);
  } catch (const std::exception&) {
    throw usage_failure("[run] device = \"" + name + "\" is not a device; use \"cpu\", \"cuda\" or \"cuda:N\"");
  }
  if (device.is_cuda() && !at::hasCUDA())
    throw usage_failure("[run] device = \"" + name +
                        "\" but this LibTorch build has no CUDA or no GPU is visible; use device = \"cpu\"");
  if (!device.is_cpu() && !device.is_cuda())
    throw usage_failure("[run] device = \"" + name + "\" is not supported; use \"cpu\" or \"cuda[:N]\"");
  return device;
}

// Metrics accumulated between two log events.
struct LogWindow {
  Clock::time_point start = Clock::now();
  int64_t steps = 0, tokens = 0;
  double loss_sum = 0, data_seconds = 0;

  MetricList finish(int64_t step, int64_t total_steps, double lr, double grad_norm, int64_t all_tokens,
                    double seconds_per_step_ema, double flops_per_token, double peak_flops) {
    const double seconds = seconds_since(start);
    const double tokens_per_s = tokens / std::max(seconds, 1e-9);
    MetricList m = {{"loss", loss_sum / steps},
                    {"lr", lr},
                    {"grad_norm", grad_norm},
                    {"tokens_per_s", tokens_per_s},
                    {"step_time_ms", 1e3 * seconds / steps},
                    {"data_time_ms", 1e3 * data_seconds / steps},
                    {"eta_s", seconds_per_step_ema * static_cast<double>(total_steps - step)},
                    {"tokens", static_cast<double>(all_tokens)}};
    if (flops_per_token > 0 && peak_flops > 0) m.emplace_back("mfu", flops_per_token * tokens_per_s / peak_flops);
    *this = LogWindow{};
    return m;
  }
};

// Everything a run owns, destroyed in reverse order of creation.
struct Pipeline {
  ModelInstance model;
  FlatParams flat;
  OptimizerInstance optimizer;
  DatasetInstance data;
  ScheduleInstance schedule;
  std::vector<TrackerInstance> trackers;
  std::vector<HookInstance> hooks;

  Pipeline(const PipelineConfig& c, const RunContext& run)
      : model(c.model, run),
        flat(model.params()),
        optimizer(c.optimizer, run, flat.abi()),
        data(c.data, run),
        schedule(c.schedule, run) {
    for (const auto& slot : c.trackers) trackers.emplace_back(slot, run);
    for (const auto& slot : c.hooks) hooks.emplace_back(slot, run);
  }
};

}  // namespace

TrainSummary train(const PipelineConfig& config, const std::string& run_dir) {
  const RunSettings& settings = config.run;
  const at::Device device = resolve_device(settings.device);
  if (settings.threads > 0) at::set_num_threads(static_cast<int>(settings.threads));
  at::manual_seed(settings.seed);  // dropout and anything else drawing from the default generator

  RunContext run{run_dir, device.str(), settings.seed, 0, 1, settings.steps};
  Pipeline p(config, run);
  EventBus events(p.hooks);
  spdlog::info("model {}: {} parameters; data {}; optimizer {}; schedule {}", p.model.component().name,
               p.flat.numel(), p.data.component().name, p.optimizer.component().name, p.schedule.component().name);
  const double flops_per_token = p.model.flops_per_token();
  double peak_flops = settings.peak_flops;
  if (flops_per_token > 0 && peak_flops <= 0) {
    peak_flops = measure_peak_flops(device);
    spdlog::info("MFU is reported against the fp32 GEMM peak measured now: {:.1f} GFLOP/s", peak_flops / 1e9);
  }

  const double nan = std::numeric_limits<double>::quiet_NaN();
  loom_state_view state{sizeof(loom_state_view), 0, settings.steps, 0, nan, nan, 0.0, 0, nullptr,
                        run_dir.c_str(), 0, 1, nullptr};
  TrainSummary summary;
  const auto started = Clock::now();
  try {
    p.model.set_training(true);
    Prefetcher prefetch(p.data, static_cast<size_t>(2 * settings.grad_accum), device);
    LogWindow window;
    double step_seconds_ema = 0;
    const double base_lr = p.optimizer.base_lr();
    bool stop = events.fire(LOOM_EVENT_TRAIN_BEGIN, state).request_stop != 0;

    for (int64_t step = 1; step <= settings.steps && !stop; ++step) {
      const auto step_started = Clock::now();
      stop |= events.fire(LOOM_EVENT_STEP_BEGIN, state).request_stop != 0;

      // 1. Draw the micro-batches and count the tokens that carry loss.
      const auto data_started = Clock::now();
      std::vector<Batch> batches;
      int64_t tokens = 0;
      for (int64_t i = 0; i < settings.grad_accum; ++i) {
        batches.push_back(prefetch.pop());
        tokens += batches.back().tokens;
      }
      window.data_seconds += seconds_since(data_started);

      // 2. Forward and backward; every token weighs the same across micro-batches.
      p.flat.zero_grad();
      at::Tensor loss_total = at::zeros({}, at::TensorOptions().device(device));
      const double scale = 1.0 / static_cast<double>(std::max<int64_t>(tokens, 1));
      for (const Batch& b : batches) {
        at::Tensor loss = p.model.loss_sum(b.inputs.to(device), b.targets.to(device));  // no-op once there
        (loss * scale).backward();
        loss_total += loss.detach();
      }

      // 3. One host sync per step: mean loss and global grad norm together.
      const at::Tensor norm = p.flat.grad_norm();
      const at::Tensor stats = at::stack({loss_total * scale, norm.to(loss_total.dtype())}).to(at::kCPU, at::kDouble);
      state.loss = stats[0].item<double>();
      state.grad_norm = stats[1].item<double>();
      stop |= events.fire(LOOM_EVENT_AFTER_BACKWARD, state).request_stop != 0;

      // 4. Clip, schedule, let hooks veto, step.
      if (settings.clip_grad_norm > 0) p.flat.clip(norm, settings.clip_grad_norm);
      state.lr = base_lr * p.schedule.factor(step);
      const loom_control control = events.fire(LOOM_EVENT_BEFORE_OPTIMIZER_STEP, state);
      stop |= control.request_stop != 0;
      if (control.skip_step) ++summary.skipped_steps;
      else p.optimizer.step(state.lr, step);

      // 5. Book-keeping, step_end and logging.
      state.step = step;
      state.tokens += tokens;
      if (step == 1) summary.first_loss = state.loss;
      summary.last_loss = state.loss;
      summary.steps = step;
      window.steps += 1;
      window.tokens += tokens;
      window.loss_sum += state.loss;
      stop |= events.fire(LOOM_EVENT_STEP_END, state).request_stop != 0;

      const double step_seconds = seconds_since(step_started);
      step_seconds_ema = step == 1 ? step_seconds : 0.9 * step_seconds_ema + 0.1 * step_seconds;
      if (step % settings.log_every == 0 || step == settings.steps || stop) {
        MetricList metrics = window.finish(step, settings.steps, state.lr, state.grad_norm, state.tokens,
                                           step_seconds_ema, flops_per_token, peak_flops);
        if (summary.skipped_steps > 0) metrics.emplace_back("skipped_steps", static_cast<double>(summary.skipped_steps));
        const MetricsView view(step, metrics);
        for (auto& tracker : p.trackers) tracker.log(view);
        state.metrics = view.get();
        stop |= events.fire(LOOM_EVENT_LOG, state).request_stop != 0;
        state.metrics = nullptr;
      }
    }
    events.fire(LOOM_EVENT_TRAIN_END, state);
  } catch (const Failure& f) {
    events.fire_exception(state, f.what());
    throw;
  } catch (const c10::Error& e) {
    const std::string message = std::string("LibTorch error: ") + e.what_without_backtrace();
    events.fire_exception(state, message.c_str());
    throw runtime_failure(message);
  }
  summary.seconds = seconds_since(started);
  return summary;
}

}  // namespace loom
