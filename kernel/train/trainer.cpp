// trainer.cpp: the training loop of docs/design.md "One training step": the run around the
// steps. run() reads top to bottom; each phase is one method below it, in the order a run
// meets them. One step itself is train_step.cpp; saves, resumes and exports trainer_checkpoints.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "base/failure.hpp"
#include "base/signals.hpp"
#include "base/writer_guard.hpp"
#include "train/cpu_memory.hpp"
#include "train/cuda_probe.hpp"
#include "train/memory_report.hpp"
#include "train/device.hpp"
#include "train/trainer_loop.hpp"

namespace loom {

Trainer::Trainer(const RunPlan& plan, const std::string& run_dir, const DistEnv& env, const std::function<void()>& ranks_met)
    : plan_(plan),
      settings_(plan.run),
      device_(resolve_device(settings_.device, env.local_rank, settings_.device_at)),
      run_dir_(run_dir),
      restart_(restart_description(env)) {
  apply_run_settings(settings_, device_, env.local_world_size);
  comm_ = build_communicator(plan, env, device_);
  mesh_ = make_device_mesh(env.world_size, env.rank, static_cast<int>(plan.distributed.tensor_parallel),
                           static_cast<int>(plan.distributed.sequence_parallel),
                           static_cast<int>(plan.distributed.context_parallel),
                           static_cast<int>(plan.distributed.pipeline_parallel));
  const int experts = static_cast<int>(plan.distributed.expert_parallel);
  if (mesh_.tensor > 1 || mesh_.sequence > 1 || mesh_.pipeline > 1 || experts > 1) {  // model and replica groups
    mesh_groups_ = std::make_unique<MeshGroups>(*comm_, mesh_, experts);
    if (mesh_.tensor > 1) tensor_parallel_ = std::make_unique<TensorParallel>(*mesh_groups_->tensor(), mesh_);
    world_comm_ = std::move(comm_);
    comm_ = mesh_groups_->take_replica_group();
    spdlog::info("device mesh: {}{}", mesh_.describe(),
                 experts > 1 ? "; expert groups of " + std::to_string(experts) + " data ranks, rank " +
                                   std::to_string(mesh_.rank) + ": expert rank " + std::to_string(mesh_.rank % experts)
                             : std::string());
  }
  ranks_met();
  RunContext context;
  context.run_dir = run_dir;
  context.device = device_.str();
  context.seed = static_cast<uint64_t>(settings_.seed);
  context.rank = mesh_.data_rank();
  context.world_size = mesh_.data();
  context.tensor_parallel_rank = mesh_.tensor_rank();
  context.tensor_parallel_size = mesh_.tensor;
  // The sequence axis goes to the model as Ulysses' group or as the ring's (mesh_.ring).
  (mesh_.ring ? context.context_parallel_rank : context.sequence_parallel_rank) = mesh_.sequence_rank();
  (mesh_.ring ? context.context_parallel_size : context.sequence_parallel_size) = mesh_.sequence;
  context.pipeline_parallel_rank = mesh_.pipeline_rank();
  context.pipeline_parallel_size = mesh_.pipeline;
  context.expert_parallel_rank = mesh_.rank % experts;
  context.expert_parallel_size = experts;
  if (plan.distributed.sparse_tables == "row_sharded" && mesh_.world_size > 1) {  // ABI 1.14
    sparse_group_ = std::make_unique<SparseShardGroup>(*world());
    context.sparse_shard_rank = mesh_.rank;
    context.sparse_shard_size = mesh_.world_size;
  }
  context.total_steps = settings_.steps;
  Pipeline::ExpertsElsewhere elsewhere;  // [model] init_from under expert parallelism
  if (experts > 1)
    elsewhere = [this](ModelInstance& model) { return experts_held_elsewhere(model, *mesh_groups_->experts()); };
  Pipeline::OtherStagesLayers other_stages;  // each stage holding its own layers, where that is built
  if (mesh_.pipeline > 1)
    other_stages = [this](ModelInstance& model) -> std::optional<std::set<std::string>> {
      const int64_t layers = model.attributes().pipeline_layers;
      if (layers <= 0) return std::nullopt;  // refused below
      if (const std::string why = why_stages_hold_whole_model(plan_, model); !why.empty()) {
        spdlog::info("pipeline: every stage holds the whole model: {}", why);
        return std::nullopt;
      }
      stage_of_layer_ = stage_of_each_layer(cut_pipeline(plan_.distributed, layers, model.component().name), mesh_.pipeline);
      return other_stages_layers(model, stage_of_layer_, mesh_.pipeline_rank());
    };
  try {
    p_ = std::make_unique<Pipeline>(plan, context, elsewhere, other_stages);
  } catch (const std::exception& e) {  // out of CUDA memory while building: one line, not LibTorch's trace
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    const std::string what = c10_error ? c10_error->what_without_backtrace() : e.what();
    if (!device_.is_cuda() || !is_device_out_of_memory(what)) throw;
    throw runtime_failure(setup_out_of_memory_line(device_.str(), settings_.gpu_memory_gib,
                                                   cuda_peak_allocated_bytes(device_), plan.distributed.offload != "none", what));
  }
  if (mesh_.ring && !p_->model.handles_context_parallel())
    throw usage_failure("[distributed] context_parallel = " + std::to_string(mesh_.sequence) + ": model " +
                        p_->model.component().name + " does not attend over rings of chunks (loom_model_attributes."
                        "context_parallel), and attention over its own chunks alone would be wrong; use a model "
                        "that does (llama, gpt, hf_causal_lm) or context_parallel = 1");
  if (!mesh_.ring && mesh_.sequence > 1 && !p_->model.handles_sequence_parallel())
    throw usage_failure("[distributed] sequence_parallel = " + std::to_string(mesh_.sequence) + ": model " +
                        p_->model.component().name + " does not take pieces of rows (loom_model_attributes."
                        "sequence_parallel), and attention over a piece alone would be wrong; use a model "
                        "that does (llama, gpt, hf_causal_lm) or sequence_parallel = 1");
  if (experts > 1 && !p_->model.handles_expert_parallel())
    throw usage_failure("[distributed] expert_parallel = " + std::to_string(experts) + ": model " +
                        p_->model.component().name + " does not compute its experts over an expert-parallel group "
                        "(loom_model_attributes.expert_parallel); use a mixture of experts through "
                        "hf_causal_lm (Qwen2-MoE, Qwen3-MoE, Mixtral) or expert_parallel = 1");
  if (mesh_.pipeline > 1) {
    const int64_t layers = p_->model.attributes().pipeline_layers;
    if (layers <= 0)
      throw usage_failure("[distributed] pipeline_parallel = " + std::to_string(mesh_.pipeline) + ": model " +
                          p_->model.component().name + " does not run ranges of its layers (loom_model_attributes."
                          "pipeline_layers); use a model that does (gpt, llama, hf_causal_lm without a mixture of "
                          "experts) or pipeline_parallel = 1");
    stages_ = std::make_unique<StageRunner>(*mesh_groups_->pipeline(), plan.distributed, layers,
                                            p_->model.component().name);
    spdlog::info("pipeline: {}", stages_->describe());
    if (p_->stage_layers) {
      stage_placement_ = std::make_unique<StagePlacement>(*p_, *mesh_groups_->pipeline(), stage_of_layer_);
      spdlog::info("pipeline: this stage holds {}", stage_placement_->describe());
      // A stage that dropped the others' layers as they were made could not hash them alone.
      if (p_->frozen.frozen > 0)
        use_chained_frozen_checksum(p_->model, *mesh_groups_->pipeline(), stage_of_layer_,
                                    tensor_parallel_ ? &tensor_parallel_->group() : nullptr);
    }
  }
  if (tensor_parallel_) {
    TensorParallel::check_model_splits(p_->model.params(), p_->model.component().name, mesh_.tensor);
    whole_params_ = TensorParallel::whole_params(dense_params(p_->model.params()));
    if (p_->frozen.frozen > 0 && !stage_placement_) use_whole_frozen_checksum(*p_, tensor_parallel_->group());
  }
  if (experts > 1) {  // each rank holds its experts only
    experts_ = std::make_unique<ExpertPlacement>(*p_, *mesh_groups_->experts());
    if (p_->frozen.frozen > 0) experts_->use_whole_frozen_checksum();
  }
  // Placed groups: experts summed over the ranks holding the same ones, or a stage's layers over its replicas.
  Communicator* placed_group = mesh_groups_ ? mesh_groups_->experts() : nullptr;
  Communicator* placed_replicas = mesh_groups_ ? mesh_groups_->expert_replicas() : nullptr;
  if (stage_placement_) {
    placed_group = mesh_groups_->pipeline();
    placed_replicas = mesh_groups_->stage_replicas();
  }
  grad_sync_ = build_gradient_sync(plan, *p_, comm_.get(), placed_group, placed_replicas);
  shards_ = build_parameter_shards(plan, *p_, comm_.get(), device_);
  if (settings_.cuda_graph) {
    const std::string why = MicroBatchGraphs::refusal(device_, mesh_.world_size, p_->sparse.numel() > 0);
    if (!why.empty()) {
      spdlog::warn("run.cuda_graph = true: the steps run without graphs: {}", why);
    } else {
      graphs_ = std::make_unique<MicroBatchGraphs>(device_, p_->gradient_writes);
      spdlog::warn("run.cuda_graph = true: each micro-batch's forward and backward is captured on the second step "
                   "and replayed after; this path has not run on a GPU yet");
    }
  }
  events_ = std::make_unique<EventBus>(p_->hooks);
  for (HookInstance& hook : p_->hooks) {
    if (!hook.reads_step_values()) continue;
    read_every_step_ = true;  // nan_guard, and hooks built before ABI 1.9, which cannot say
    if (device_.is_cuda())
      spdlog::info("[[hooks]] {} reads every step's loss, so each step waits for the GPU to finish it",
                   hook.component().name);
  }
  evaluator_ = build_evaluator(plan, *p_, device_, comm_.get());
  if (evaluator_ && stages_) {
    Evaluator::StagedForward staged;  // a stage holding its own layers only evaluates through the pipeline
    if (stage_placement_)
      staged = [this](const Batch& b) {
        return stages_->forward_only(b, [this](const Batch& batch, const ModelInstance::LayerRange& layers) {
          return p_->model.forward_layers(batch.inputs, batch.targets, batch.fields, layers, "[eval_data]");
        });
      };
    evaluator_->set_pipeline_stage(stages_->holds_loss(), staged);
  }
  checkpoints_ = build_checkpoints(plan, *p_, run_dir);
  if (checkpoints_ && p_->sparse.row_sharded() && p_->sparse_optimizer && p_->sparse_optimizer->component().plugin &&
      p_->sparse_optimizer->component().plugin->abi_minor < 14 && !p_->sparse_optimizer->state().empty())
    throw usage_failure("[distributed] sparse_tables = \"row_sharded\" with [checkpoint]: sparse optimizer " +
                        p_->sparse_optimizer->component().name + " was built against Loom ABI 1." +
                        std::to_string(p_->sparse_optimizer->component().plugin->abi_minor) +
                        ", before per-row state could be declared (add_row_state), so only rank 0's rows of its "
                        "state would be saved; rebuild it against this SDK or use sparse_tables = \"replicated\"");
  // World rank 0 writes; under tensor or expert parallelism the rest of its group gathers with it.
  // Under stage-local pipelines every stage's first replica sends its layers to world rank 0.
  const bool stage_sender = stage_placement_ && mesh_.data_rank() == 0 && mesh_.sequence_rank() == 0;
  if (plan.hf_export.enabled &&
      (env.rank == 0 || (tensor_parallel_ && rank() == 0) || (experts_ && env.rank < experts) || stage_sender))
    exporter_ = std::make_unique<PeriodicExport>(plan.hf_export, run_dir, p_->model, plan.lora);
  spdlog::info("model {}: {}; data {}; optimizer {}; schedule {}", p_->model.component().name,
               p_->frozen.frozen > 0 ? p_->frozen.describe()
                                     : std::to_string(p_->flat.numel() + p_->sparse.numel()) + " parameters" +
                                           (experts_ ? " on this rank, " + experts_->describe() : "") +
                                           (p_->sparse.row_sharded() ? " on this rank (its rows of the sparse tables)" : ""),
               p_->data.component().name, p_->optimizer.component().name, p_->schedule.component().name);
  for (const FrozenSummary::Match& m : p_->frozen.matches)
    spdlog::info("[model] freeze \"{}\": {}", m.pattern, m.first_names);
  if (p_->sparse_optimizer)
    spdlog::info("{} sparse tables ({} parameters, {:.1f} MiB{}) outside the flat buffers, updated by "
                 "[sparse_optimizer] {} on the rows each step touches",
                 p_->sparse.abi().sparse_table_count, p_->sparse.numel(),
                 static_cast<double>(p_->sparse.bytes()) / (1 << 20),
                 p_->sparse.row_sharded() ? ": this rank's rows, split by rows over " + std::to_string(world_size()) + " ranks"
                                          : std::string(),
                 p_->sparse_optimizer->component().name);
  log_state_bytes();
  mfu_ = build_mfu_baseline(p_->model, settings_, device_, mesh_.world_size);
  data_source_ = "[data] " + p_->data.component().name;
  progress_.total_steps = p_->steps;
  if (comm_ && settings_.epochs > 0) {  // shards of different lengths: every rank stops at the same step
    at::Tensor fewest = at::full({1}, -progress_.total_steps, at::kLong);
    comm_->allreduce_max(fewest);
    progress_.total_steps = -fewest.item<int64_t>();
  }
}

TrainSummary Trainer::run() {
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
    const bool check_syncs = device_.is_cuda() && !read_every_step_ && cuda_sync_check_requested();
    bool stop = fire(LOOM_EVENT_TRAIN_BEGIN).request_stop != 0;
    while (!stop && progress_.step < progress_.total_steps) {
      loom_control requests;
      {  // the process's first step initialises lazily (cuBLAS, the batch's id scan) and may wait
        const NoHostSyncScope no_sync(check_syncs && summary_.steps > 0);
        requests = train_step(prefetch);
      }
      if (data_ran_out_) break;  // mid-step: see train_step
      progress_.elapsed_s = elapsed_before + seconds_since(started);
      stop = end_of_step(requests, prefetch);
    }
    if (settings_.epochs > 0 && !stop) finish_last_epoch(prefetch);
    if (checkpoints_ && plan_.checkpoint.at_end && last_saved_step_ != progress_.step) save();
    if (checkpoints_) checkpoints_->wait();
    if (exporter_ && exporter_->due_at_end(progress_.step)) export_now();
    read_step_values();  // a stream that ended mid-window
    fire(LOOM_EVENT_TRAIN_END);
    check_not_diverged();
    finish_trackers(SignalWatch::requested() != 0 ? LOOM_RUN_INTERRUPTED : LOOM_RUN_FINISHED, "");
  } catch (const FolderLost&) {
    throw;  // another run writes the folder now: no hook or tracker may record this run's end there
  } catch (const Failure& f) {
    // A plugin's allocation that failed on the device (its status carries LibTorch's words).
    const std::string message = device_.is_cuda() && is_device_out_of_memory(f.what()) ? out_of_memory(f.what()) : f.what();
    events_->fire_exception(state_view(), message.c_str());
    finish_trackers_after_failure(message);
    if (message != f.what()) throw runtime_failure(message);
    throw;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    const std::string message = device_.is_cuda() && is_device_out_of_memory(what) ? out_of_memory(what)
                                                                                    : "LibTorch error: " + what;
    events_->fire_exception(state_view(), message.c_str());
    finish_trackers_after_failure(message);
    throw runtime_failure(message);
  }
  summary_.seconds = seconds_since(started);
  return summary_;
}

std::string Trainer::out_of_memory(const std::string& cause) {
  return out_of_memory_line(device_.str(), progress_.step + 1, settings_.gpu_memory_gib, held_bytes(),
                            cuda_peak_allocated_bytes(device_), cause);
}

void Trainer::check_not_diverged() {
  read_step_values();
  if (summary_.steps == 0 || std::isfinite(progress_.loss)) return;  // progress_: the last step's own loss
  throw runtime_failure("training diverged: the loss of the last step (" + std::to_string(progress_.step) +
                        ") is " + std::to_string(progress_.loss) + "; " +
                        std::to_string(summary_.nonfinite_steps) + " of " + std::to_string(summary_.steps) +
                        " steps had a non-finite loss. Lower the learning rate, set run.clip_grad_norm or add the "
                        "nan_guard hook; the checkpoints with a finite loss are kept");
}

void Trainer::finish_trackers(loom_run_outcome outcome, const std::string& message) {
  for (auto& tracker : p_->trackers) tracker.finish(outcome, progress_.step, message);
}

void Trainer::finish_trackers_after_failure(const std::string& message) noexcept {
  try {
    finish_trackers(LOOM_RUN_FAILED, message);
  } catch (const std::exception& e) {
    spdlog::warn("a tracker could not record the failure: {}", e.what());
  }
}

HeldBytes Trainer::held_bytes() {
  int64_t params = 0, grads = 0, state = 0;
  for (const at::Tensor& buffer : p_->flat.param_buffers()) params += static_cast<int64_t>(buffer.nbytes());
  grads = params;
  if (comm_ && p_->flat.reduces_to_owner()) {  // the rest of a sharded group is given back as its reduce finishes
    grads = 0;
    const auto buffers = p_->flat.param_buffers();
    const auto sharded = p_->flat.sharded_groups();
    const auto owned = p_->flat.owned_slices();
    for (size_t g = 0; g < buffers.size(); ++g)
      grads += (sharded[g] ? owned[g].length : buffers[g].numel()) * buffers[g].element_size();
  }
  if (shards_) params = shards_->resident_param_bytes();
  for (const auto& st : p_->optimizer.state()) state += static_cast<int64_t>(st.tensor->nbytes());
  int64_t offloaded = 0;
  if (p_->offload) offloaded = p_->offload->host_bytes() + std::exchange(state, 0);
  params += p_->sparse.bytes();
  if (p_->sparse_optimizer)
    for (const auto& st : p_->sparse_optimizer->state()) state += static_cast<int64_t>(st.tensor->nbytes());
  int64_t frozen = 0;  // outside the flat buffers, whole on every rank
  for (const ModelParam& param : p_->model.params())
    if (param.frozen) frozen += static_cast<int64_t>(param.tensor->nbytes());
  return {params, grads, state, frozen, offloaded};
}

void Trainer::log_state_bytes() {
  const HeldBytes held = held_bytes();
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  const int64_t peak = device_.is_cpu() ? peak_resident_bytes() : -1;
  spdlog::info("held per rank between steps: parameters {:.1f} MiB, gradients {:.1f} MiB, optimizer state {:.1f} MiB"
               "{}{} (shard {}, {} rank{}){}",
               mib(held.parameters), mib(held.gradients), mib(held.optimizer_state),
               held.frozen > 0 ? fmt::format(", frozen weights {:.1f} MiB", mib(held.frozen)) : "",
               held.offloaded > 0 ? fmt::format("; offloaded to host memory: the optimizer's state and copies, {:.1f} MiB",
                                                mib(held.offloaded)) : "",
               shard_mode_name(p_->flat.shard().mode), world_size(), world_size() == 1 ? "" : "s",
               peak > 0 ? fmt::format("; this process's peak resident memory so far {:.0f} MiB", mib(peak)) : "");
}

bool Trainer::end_of_step(loom_control requests, Prefetcher& prefetch) {
  check_still_writer();  // before this step logs or saves anything into the run folder
  bool signalled = SignalWatch::requested() != 0;
  // A finite stream (ABI 1.7) with no batch for another step: its queued window ends fire
  // first, so what their hooks ask for (an evaluation) joins the agreement below.
  bool data_ends = prefetch.data_ends_next();
  if (data_ends) merge_control(requests, finish_data(prefetch));
  bool epoch_save = plan_.checkpoint.every_epoch && epoch_ended_;
  if (world()) agree(requests, signalled, epoch_save, data_ends);  // every rank takes the same branches below
  if (data_ends)
    spdlog::info("the data has no batch left after step {}{}; the run ends here", progress_.step,
                 world() ? " on at least one rank" : "");
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
  if (exporter_ && exporter_->due(step)) export_now();
  if (signalled)
    spdlog::info("stopping after step {} on signal {}{}", step, SignalWatch::requested(),
                 checkpoints_ ? "" : "; nothing saved: the manifest has no [checkpoint] table");
  return stop;
}

bool Trainer::evaluate() {
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

bool Trainer::log() {
  read_step_values();
  const int64_t window_steps = window_.steps();
  MetricList metrics = window_.finish(progress_, mfu_.flops_per_token, mfu_.peak_flops);
  const double logged_loss = metrics.front().second;  // LogWindow puts "loss" first
  if (!logged_once_) summary_.first_loss = logged_loss;
  logged_once_ = true;
  summary_.last_loss = logged_loss;
  if (comm_) metrics.emplace_back("buckets_started_in_backward", overlap_sum_ / static_cast<double>(window_steps));
  overlap_sum_ = 0;
  if (summary_.skipped_steps > 0) metrics.emplace_back("skipped_steps", static_cast<double>(summary_.skipped_steps));
  if (!p_->sparse.empty() && world_size() > 1) {  // what the sparse tables cost the network a step
    const int64_t sent = p_->sparse.take_sent_bytes() + (sparse_group_ ? sparse_group_->take_sent_bytes() : 0);
    metrics.emplace_back("sparse_sent_mib", static_cast<double>(sent) / (1 << 20) / static_cast<double>(window_steps));
  }
  if (const int64_t peak = cuda_peak_allocated_bytes(device_); peak >= 0)  // torch.cuda.max_memory_allocated
    metrics.emplace_back("gpu_peak_gib", static_cast<double>(peak) / (1LL << 30));
  if (stages_) {  // the mean over the stages, and what the schedule leaves with their pass times
    const StageRunner::Bubble bubble = stages_->take_bubble();
    metrics.emplace_back("pipeline_bubble", bubble.measured);
    metrics.emplace_back("pipeline_bubble_expected", bubble.expected);
  }
  if (stages_ && comm_) model_metrics_.align_names(*comm_, device_);  // only the last stage reports
  const MetricList reported = model_metrics_.finish(comm_.get(), window_steps);
  metrics.insert(metrics.end(), reported.begin(), reported.end());
  metrics.insert(metrics.end(), eval_metrics_.begin(), eval_metrics_.end());
  const MetricsView view(progress_.step, metrics);
  for (auto& tracker : p_->trackers) tracker.log(view);
  return fire(LOOM_EVENT_LOG, view.get()).request_stop != 0;
}

void Trainer::log_to_trackers(const MetricList& metrics) {
  const MetricsView view(progress_.step, metrics);
  for (auto& tracker : p_->trackers) tracker.log(view);
}

void Trainer::agree(loom_control& requests, bool& signalled, bool& epoch_save, bool& data_ends) {
  at::Tensor flags = at::tensor({requests.request_stop, requests.request_save, requests.request_eval,
                                 requests.request_rollback, static_cast<int32_t>(signalled),
                                 static_cast<int32_t>(epoch_save), static_cast<int32_t>(data_ends)},
                                at::kInt);
  world()->allreduce_max(flags);
  requests.request_stop = flags[0].item<int32_t>();
  requests.request_save = flags[1].item<int32_t>();
  requests.request_eval = flags[2].item<int32_t>();
  requests.request_rollback = flags[3].item<int32_t>();
  signalled = flags[4].item<int32_t>() != 0;
  epoch_save = flags[5].item<int32_t>() != 0;
  data_ends = flags[6].item<int32_t>() != 0;
}

loom_control Trainer::fire(loom_event event, const loom_metrics* metrics) {
  return events_->fire(event, state_view(metrics));
}

loom_state_view Trainer::state_view(const loom_metrics* metrics) const {
  return progress_.view(run_dir_, rank(), world_size(), metrics);
}


TrainSummary train(const RunPlan& plan, const std::string& run_dir, const DistEnv& env,
                   const std::function<void()>& ranks_met) {
  return Trainer(plan, run_dir, env, ranks_met).run();
}

}  // namespace loom
