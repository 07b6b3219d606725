// trainer_loop.hpp: the object behind train() (trainer.hpp), one per run: its state and its
// phases. trainer.cpp holds the run around the steps (set-up, resume, evaluation, logging,
// saving, agreement across ranks); train_step.cpp holds one optimizer step (drawing the
// micro-batches, forward and backward, the step's values, clipping and the update).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "train/events.hpp"
#include "train/expert_placement.hpp"
#include "train/factories.hpp"
#include "train/memory_report.hpp"
#include "train/micro_batch_graphs.hpp"
#include "train/log_window.hpp"
#include "train/model_metrics.hpp"
#include "train/periodic_export.hpp"
#include "train/prefetcher.hpp"
#include "train/progress.hpp"
#include "train/run_state.hpp"
#include "train/stage_placement.hpp"
#include "train/stage_runner.hpp"
#include "train/step_values.hpp"
#include "train/mesh_groups.hpp"
#include "train/tensor_parallel_trainer.hpp"
#include "train/tensor_parallel_checkpoint.hpp"
#include "train/trainer.hpp"

namespace loom {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// resume: continue an interrupted run exactly (data position, counters, trackers' state).
// rollback: a hook undoes a bad stretch: weights, optimizer and RNG go back to the checkpoint,
// the data goes on from where it is, so the batches that caused the trouble are not replayed.
enum class Restore { resume, rollback };

class Trainer {
 public:
  Trainer(const RunPlan& plan, const std::string& run_dir, const DistEnv& env, const std::function<void()>& ranks_met);

  TrainSummary run();

 private:
  // A run whose last step's loss is NaN or infinite did not succeed, whatever hooks did.
  void check_not_diverged();

  void finish_trackers(loom_run_outcome outcome, const std::string& message);
  // On the way out with an error: a tracker failing now must not hide that error.
  void finish_trackers_after_failure(const std::string& message) noexcept;

  // What each rank holds for the model between steps, so the effect of [distributed] shard
  // shows in the first lines of a run (tools/bench/shard_bench reads them).
  void log_state_bytes();
  // What this rank holds between steps (the "held per rank" line, out_of_memory's).
  HeldBytes held_bytes();
  // The one line a run stops with when a CUDA allocation failed (train/memory_report.hpp).
  std::string out_of_memory(const std::string& cause);

  // One optimizer step (progress_.step + 1); returns the hooks' merged requests.
  loom_control train_step(Prefetcher& prefetch);

  // Brings the steps' losses and gradient norms from the device into progress_, summary_ and
  // the log window (step_values.hpp); a no-op when every step so far has been read.
  void read_step_values();

  // The next batch to train on. An epoch a finite dataset ends on the way fires epoch_end and
  // epoch_begin, whose requests join the step's.
  Batch next_batch(Prefetcher& prefetch, loom_control& requests);

  // This rank's data ends after this step: the window ends still queued before the end fire
  // epoch_end (an evaluation after the last window), as a step drawing past them would.
  loom_control finish_data(Prefetcher& prefetch);

  // A run by epochs has drawn its last epoch's last batch; the dataset's end of that epoch
  // follows in the queue. Taking it fires epoch_end (no epoch_begin: no epoch follows), so the
  // count and the saved data position include it.
  void finish_last_epoch(Prefetcher& prefetch);

  // run.grad_accum, or what run.global_batch_size makes of the first micro-batch's rows.
  int64_t micro_batches_per_step(const Batch& first);

  // A micro-batch whose model reported units or metrics: its units join the step's total
  // (units_total stays undefined while no model reports units), its metrics the log window.
  void count_units(const ForwardResult& out, const Batch& b, int64_t tokens_before, at::Tensor& units_total);

  // After each step: what the hooks asked for and the signals received, agreed across ranks,
  // in a fixed order: roll back, evaluate, log, save. Returns whether the run stops.
  bool end_of_step(loom_control requests, Prefetcher& prefetch);

  // Loads a checkpoint into the live run (see Restore).
  void restore(const std::filesystem::path& path, Restore mode);

  // This rank's data position. Resuming at another world size (the weights and optimizer
  // state reshard exactly) works when every rank saved the same position, as datasets that
  // deal out a global sample order do (synthetic, token_file); then each new rank takes it.
  std::string data_state_for_this_rank(const RestoredRun& restored, const std::string& origin) const;

  // A hook asked to undo a bad stretch (nan_guard action = "rollback").
  void roll_back();

  // Evaluates on [eval_data], keeps the metrics for this step's tracker record and fires
  // eval_end; returns whether a hook asked to stop (early stopping).
  bool evaluate();

  // Hands the window's metrics (and this step's evaluation) to trackers, then fires log;
  // returns whether a hook asked to stop. One record per step: trackers never see a step twice.
  bool log();

  void log_to_trackers(const MetricList& metrics);

  // Every rank takes part (their data positions are gathered). Rank 0 writes, or, sharded,
  // every rank writes its own part.
  void save();

  // [export] now: world rank 0 writes RUN/hf/step-N, after its tensor group gathered the split
  // weights (every rank with an exporter calls it at the same steps).
  void export_now();
  // One process's flat groups, when this rank's are not them (train/stage_placement.hpp).
  std::optional<SegmentTables> whole_layout() const;

  // Ranks act on the union of their requests and signals, so none is left waiting alone.
  void agree(loom_control& requests, bool& signalled, bool& epoch_save, bool& data_ends);

  loom_control fire(loom_event event, const loom_metrics* metrics = nullptr);
  loom_state_view state_view(const loom_metrics* metrics = nullptr) const;
  // The rank and size of the replica group (dist/device_mesh.hpp): the data-parallel rank and
  // degree, times sequence_parallel; the ranks of a tensor group share one.
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int world_size() const { return comm_ ? comm_->world_size() : 1; }
  // Every rank of the run, for decisions all must take together (null: a single process).
  Communicator* world() const { return world_comm_ ? world_comm_.get() : comm_.get(); }
  // The global gradient norm (on the device), tensor-parallel pieces counted once.
  at::Tensor gradient_norm();

  const RunPlan& plan_;
  const RunSettings& settings_;
  const at::Device device_;
  const std::string run_dir_;
  DeviceMesh mesh_;  // the world's layout: data x sequence x tensor
  std::unique_ptr<Communicator> world_comm_;         // with a model group: every rank; else null
  std::unique_ptr<MeshGroups> mesh_groups_;          // null unless tensor, sequence or expert parallel > 1
  std::unique_ptr<SparseShardGroup> sparse_group_;   // row-sharded sparse tables' lookups (ABI 1.14); else null
  std::unique_ptr<TensorParallel> tensor_parallel_;  // null unless tensor_parallel > 1
  std::unique_ptr<ExpertPlacement> experts_;         // null unless expert_parallel > 1
  std::unique_ptr<StageRunner> stages_;              // this rank's pipeline stage; null unless pipeline_parallel > 1
  std::unique_ptr<StagePlacement> stage_placement_;  // null unless each stage holds its own layers only
  std::vector<int> stage_of_layer_;                  // with stage_placement_: the pipeline rank running each layer
  std::unique_ptr<Communicator> comm_;  // the replica group; null when it has one rank
  std::set<std::string> whole_params_;  // tensor parallelism: the dense parameters not split
  std::unique_ptr<Pipeline> p_;
  std::unique_ptr<GradientSync> grad_sync_;  // gradient all-reduce overlapping backward
  std::unique_ptr<ParameterShards> shards_;  // shard = "parameters": units gathered as they run
  std::unique_ptr<MicroBatchGraphs> graphs_;  // run.cuda_graph on one CUDA process; else null (after p_: uses it)
  std::unique_ptr<EventBus> events_;
  std::unique_ptr<Evaluator> evaluator_;            // null without [eval_data]
  std::unique_ptr<CheckpointManager> checkpoints_;  // after p_: joins its writer before the backend dies
  std::unique_ptr<PeriodicExport> exporter_;        // null without [export], and on ranks other than 0
  MfuBaseline mfu_;
  std::string data_source_;    // "[data] NAME": named when the model refuses a batch's fields
  Progress progress_;
  std::string data_state_;     // dataset position after the last batch consumed
  int64_t last_saved_step_ = -1;
  std::string restart_;  // an elastic launcher's restart that started these ranks (dist_env.hpp), or ""
  LogWindow window_;
  bool epoch_ended_ = false;    // an epoch ended during the current step
  bool data_ran_out_ = false;   // a finite stream ended inside a step (ABI 1.7)
  int64_t derived_accum_ = 0;   // from run.global_batch_size, once the first batch showed its rows
  ModelMetrics model_metrics_;  // what the model reported since the last log
  double overlap_sum_ = 0;     // fraction of buckets started during backward, summed over the window
  StepValues step_values_;      // losses and norms not read from the device yet
  bool read_every_step_ = false;  // a hook reads every step's loss (loom_hook_needs_args)
  MetricList eval_metrics_;    // this step's evaluation, until the step's tracker record
  bool warned_no_eval_data_ = false;
  TrainSummary summary_;
  bool logged_once_ = false;
};

}  // namespace loom
