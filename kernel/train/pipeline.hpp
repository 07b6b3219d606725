// pipeline.hpp: every component instance a run owns, created in dependency order and
// destroyed in reverse.
#pragma once

#include <spdlog/spdlog.h>

#include <functional>
#include <limits>
#include <set>
#include <memory>
#include <optional>
#include <vector>

#include "abi/checkpoint_backend.hpp"
#include "abi/compute_components.hpp"
#include "train/flat_params.hpp"
#include "train/frozen_params.hpp"
#include "train/gradient_writes.hpp"
#include "train/optimizer_offload.hpp"
#include "train/sparse_table_updates.hpp"
#include "train/run_plan.hpp"
#include "train/sliced_start.hpp"
#include "abi/observer_components.hpp"
#include "dist/device_mesh.hpp"

namespace loom {

// The optimizer steps of the run: run.steps, or run.epochs times the dataset's epoch length
// over grad_accum (rounded up). Throws a usage Failure when run.epochs is set and the dataset
// does not say how long an epoch is.
inline int64_t total_steps(const RunPlan& c, const DatasetInstance& data) {
  if (c.run.epochs <= 0) return c.run.steps;
  const int64_t per_epoch = data.batches_per_epoch();
  if (per_epoch <= 0)
    throw usage_failure("[run] epochs = " + std::to_string(c.run.epochs) + ": [data] " + data.component().name +
                        " does not say how many batches an epoch holds (token_file and text do with report_epochs = "
                        "true); use run.steps instead");
  if (per_epoch > (std::numeric_limits<int64_t>::max() - c.run.grad_accum) / c.run.epochs)
    throw usage_failure("[run] epochs = " + std::to_string(c.run.epochs) + " of " + std::to_string(per_epoch) +
                        " batches each is more steps than a run can count; lower run.epochs");
  return (c.run.epochs * per_epoch + c.run.grad_accum - 1) / c.run.grad_accum;
}

// The context of every kind but the model, which alone sees its tensor-, sequence-, expert- and
// context-parallel groups (ABI 1.10, 1.11, 1.12, 1.16).
inline RunContext with_total_steps(RunContext run, int64_t total) {
  run.total_steps = total;
  run.tensor_parallel_rank = 0;
  run.tensor_parallel_size = 1;
  run.sequence_parallel_rank = 0;
  run.sequence_parallel_size = 1;
  run.expert_parallel_rank = 0;
  run.expert_parallel_size = 1;
  run.sparse_shard_rank = 0;
  run.sparse_shard_size = 1;
  run.context_parallel_rank = 0;
  run.context_parallel_size = 1;
  run.pipeline_parallel_rank = 0;
  run.pipeline_parallel_size = 1;
  return run;
}

// Where the context's rank sits in the run's device mesh.
inline DeviceMesh mesh_of(const RunContext& c) {
  const bool ring = c.context_parallel_size > 1;  // the sequence axis, cut for ring attention
  DeviceMesh mesh = DeviceMesh::place(c.world_size, c.rank, ring ? c.context_parallel_size : c.sequence_parallel_size,
                                      ring ? c.context_parallel_rank : c.sequence_parallel_rank,
                                      c.tensor_parallel_size, c.tensor_parallel_rank, c.pipeline_parallel_size,
                                      c.pipeline_parallel_rank);
  mesh.ring = ring;
  return mesh;
}

// Hooks and trackers see the world's ranks: under tensor or sequence parallelism several ranks
// share a data-parallel rank, and files named by rank (memory_monitor's) must not collide.
inline RunContext for_observers(const RunContext& context, int64_t total) {
  RunContext run = with_total_steps(context, total);
  const DeviceMesh mesh = mesh_of(context);
  run.rank = mesh.rank;
  run.world_size = mesh.world_size;
  return run;
}

inline RunContext for_model(const RunContext& context, int64_t total, const AdapterSettings& adapters) {
  RunContext run = context;
  run.total_steps = total;
  run.adapters = adapters;
  return run;
}

struct Pipeline {
  DatasetInstance data;  // first: with run.epochs, its epoch length sets the run's total steps
  int64_t steps;         // the run's optimizer steps (total_steps above)
  // shard = "parameters": the flat buffers' layout, from a first build that kept no values, so
  // that the model is built as this rank's slice (train/sliced_start.hpp); null otherwise, and
  // once flat has taken it over.
  std::unique_ptr<FlatParams> sliced_layout;
  // Pipeline stages: the other stages' layers, from a first build that kept no values, so that
  // the model is built with this stage's layers only (train/sliced_start.hpp).
  StageStart stage_start;
  ModelInstance model;
  FrozenSummary frozen;  // what does not train ([model] freeze, [lora]), marked on the model
  bool store_frozen;     // checkpoints hold the frozen weights ([checkpoint] frozen = "include")
  // Each pipeline stage holds its own layers only (train/stage_placement.hpp): the other stages'
  // were given back before the flat buffers took the rest over.
  bool stage_layers;
  FlatParams flat;  // rebinds the model's trainable dense parameters; the optimizer sees its buffers
  GradientWrites gradient_writes;  // each step's first gradient written over the last, not zeroed and added
  SparseTables sparse;  // the model's row-sparse tables (ABI 1.7), outside the flat buffers
  std::unique_ptr<OptimizerOffload> offload;  // [distributed] offload = "optimizer": null otherwise
  OptimizerInstance optimizer;
  std::unique_ptr<OptimizerInstance> sparse_optimizer;  // [sparse_optimizer]: null without sparse tables
  ScheduleInstance schedule;
  std::unique_ptr<DatasetInstance> eval_data;             // null without [eval_data]
  std::unique_ptr<CheckpointBackendInstance> checkpoint;  // null without [checkpoint]
  std::vector<TrackerInstance> trackers;
  std::vector<HookInstance> hooks;

  // experts_elsewhere: under expert parallelism, the experts the other ranks of the model's
  // expert group hold (train/expert_placement.hpp), for [model] init_from.
  using ExpertsElsewhere = std::function<std::set<std::string>(ModelInstance&)>;
  // slices: the layout a sliced start built the model into; init_from then writes only this
  // rank's slice of each weight. dropped: the other stages' layers, whose values it skips.
  static FrozenSummary prepare(ModelInstance& model, const RunPlan& c, const ExpertsElsewhere& elsewhere,
                               FlatParams* slices, const std::set<std::string>* dropped) {
    formats::WriteValue write;
    if (slices || dropped)
      write = [slices, dropped](const std::string& name, const at::Tensor& param, const at::Tensor& value) {
        if (dropped && dropped->count(name)) return;
        if (!slices || !slices->write_owned(name, param, value)) param.copy_(value);
      };
    if (!elsewhere) return prepare_model(model, c, nullptr, write, dropped);
    const std::set<std::string> names = elsewhere(model);
    return prepare_model(model, c, &names, write, dropped);
  }
  // other_stages: under pipeline parallelism, the parameters (trainable or frozen) of the layers
  // other stages run, to give back; nullopt (or no function) when every stage holds the whole model.
  using OtherStagesLayers = loom::OtherStagesLayers;
  // ZeRO shards over the replica group: every data and sequence rank (dist/device_mesh.hpp),
  // and a stage's own layers over that stage's part of it; placed experts are already split
  // (train/expert_placement.hpp).
  static ShardSpec shard_spec(const RunPlan& c, const RunContext& context, bool stage_layers) {
    const DeviceMesh mesh = mesh_of(context);
    ShardSpec spec;
    spec.mode = shard_mode_from_name(c.distributed.shard);
    spec.rank = mesh.replica_rank();
    spec.world_size = mesh.replicas();
    spec.shard_placed = context.expert_parallel_size <= 1;
    spec.stage_layers = stage_layers;
    spec.mapped_buffers = spec.mode == ShardMode::parameters && spec.world_size > 1 &&
                         context.device.rfind("cuda", 0) == 0;
    if (stage_layers) {
      spec.placed_world_size = mesh.replicas() / mesh.pipeline;
      spec.placed_rank = mesh.replica_rank() % spec.placed_world_size;
    }
    return spec;
  }
  // start: what a first build learned (asked again once the weights are frozen, which must agree).
  static bool give_to_other_stages(ModelInstance& model, const OtherStagesLayers& other_stages, const StageStart& start) {
    if (start.known && !start.others) return false;  // every stage holds the whole model, as logged
    const std::optional<std::set<std::string>> names = other_stages ? other_stages(model) : std::nullopt;
    if (start.dropped() && names != start.others)
      throw runtime_failure("pipeline: model " + model.component().name + "'s first build, which kept no values, "
                            "placed its layers on the stages otherwise than the build that trains ([lora] and [model] "
                            "freeze applied); the values it dropped are gone, so this run cannot start cut into "
                            "stages: please report it");
    if (names) model.give_to_other_stages(*names);
    if (start.dropped()) report_stage_start(start.dropped()->size(), model.params().size());
    return names.has_value();
  }
  Pipeline(const RunPlan& c, const RunContext& context, const ExpertsElsewhere& experts_elsewhere = {},
           const OtherStagesLayers& other_stages = {})
      : data(c.data, with_total_steps(context, context.total_steps)),
        steps(total_steps(c, data)),
        sliced_layout(sliced_start_layout(c, for_model(context, steps, c.lora), shard_spec(c, context, false))),
        stage_start(stage_start_layers(c, for_model(context, steps, c.lora), other_stages)),
        model(build_model(c.model, for_model(context, steps, c.lora), sliced_layout.get(), stage_start.dropped())),
        // init_from fills the parameters and the frozen ones are set apart before the flat
        // buffers take the rest over
        frozen(prepare(model, c, experts_elsewhere, sliced_layout.get(), stage_start.dropped())),
        store_frozen(c.checkpoint.frozen == "include"),
        stage_layers(give_to_other_stages(model, other_stages, stage_start)),
        flat(flat_params_for(sliced_layout, dense_params(model.params()), shard_spec(c, context, stage_layers))),
        gradient_writes(dense_params(model.params()), flat.resident_gradients()),
        sparse(sparse_params(model.params()), model.component().name, context.sparse_shard_size > 1),
        offload(make_offload(c, context, flat, sparse, model)),
        optimizer(c.optimizer, with_total_steps(context, steps), offload ? offload->abi() : flat.abi()),
        schedule(c.schedule, with_total_steps(context, steps)) {
    make_sparse_optimizer(c, with_total_steps(context, steps));
    // Before ABI 1.5 an optimizer cannot say which state follows its slice, and a sharded
    // checkpoint would keep only rank 0's.
    if (flat.sharded() && optimizer.component().plugin && optimizer.component().plugin->abi_minor < 5 &&
        !optimizer.state().empty())
      throw usage_failure("[distributed] shard = \"" + c.distributed.shard + "\": optimizer " +
                          optimizer.component().name + " was built against Loom ABI 1." +
                          std::to_string(optimizer.component().plugin->abi_minor) +
                          ", before optimizers could declare sharded state; rebuild it against this SDK "
                          "(sdk/README.md, add_elementwise_state) or use shard = \"none\"");
    if (flat.sharded() && (optimizer.requirements() & LOOM_OPTIMIZER_NEEDS_WHOLE_TENSORS))
      throw usage_failure("[distributed] shard = \"" + c.distributed.shard + "\": optimizer " +
                          optimizer.component().name +
                          " needs whole parameters (it declares LOOM_OPTIMIZER_NEEDS_WHOLE_TENSORS); use shard = "
                          "\"none\" with it");
    if (offload) describe_offload(c);
    const RunContext run = with_total_steps(context, steps);
    if (c.eval_data.component) eval_data = std::make_unique<DatasetInstance>(c.eval_data, run);
    const DeviceMesh mesh = mesh_of(context);
    const RowPieces pieces{mesh.sequence_rank(), mesh.sequence, mesh.ring};
    data.cut_rows(pieces);  // the model takes its sequence piece of every row
    if (eval_data) eval_data->cut_rows(pieces);
    if (c.checkpoint.enabled) checkpoint = std::make_unique<CheckpointBackendInstance>(c.checkpoint_backend, run);
    const RunContext observer = for_observers(context, steps);
    for (const auto& slot : c.trackers) {
      if (observer.rank != 0 && !slot.every_rank) continue;  // rank 0 logs the reduced metrics
      try {
        trackers.emplace_back(slot, observer);
      } catch (const Failure& f) {  // a tracker that cannot start (locked database, full disk)
        if (slot.required || f.code() != ExitCode::runtime) throw;
        spdlog::warn("{}; the run goes on without this tracker (set required = true to make this fatal)", f.what());
      }
    }
    for (const auto& slot : c.hooks) hooks.emplace_back(slot, observer);
  }

 private:
  static std::unique_ptr<OptimizerOffload> make_offload(const RunPlan& c, const RunContext& context,
                                                        const FlatParams& flat, const SparseTables& sparse,
                                                        ModelInstance& model) {
    if (c.distributed.offload == "none") return nullptr;
    if (!sparse.empty())
      throw usage_failure("[distributed] offload = \"" + c.distributed.offload + "\": model " +
                          model.component().name + " has sparse tables, which offload does not take yet; remove offload");
    const auto piece_bytes = static_cast<int64_t>(c.distributed.offload_piece_mb * (1 << 20));
    // One process: a gradient is final once the last micro-batch's backward accumulated it, so
    // its piece can leave then. With more, it is final only once reduced.
    const bool early = context.world_size == 1;
    return std::make_unique<OptimizerOffload>(flat, piece_bytes,
                                              early ? dense_params(model.params()) : std::vector<ModelParam>{});
  }
  void describe_offload(const RunPlan& c) const {
    const std::string how =
        optimizer.updates_pieces()
            ? fmt::format("in {} piece{} of at most {} MiB, each copy overlapping another's update",
                          offload->pieces().size(), offload->pieces().size() == 1 ? "" : "s",
                          c.distributed.offload_piece_mb)
            : "whole, after every copy arrived (optimizer " + optimizer.component().name +
                  " does not declare LOOM_OPTIMIZER_ELEMENTWISE, so its pieces cannot overlap)";
    spdlog::info("[distributed] offload = \"optimizer\": the optimizer updates a copy of the parameters in host memory "
                 "(with the gradients {:.1f} MiB, the optimizer's state on top), {}{}",
                 static_cast<double>(offload->host_bytes()) / (1 << 20), how,
                 flat.param_buffers().empty() || flat.param_buffers().front().is_cpu()
                     ? "; on the CPU that saves no memory" : "");
  }
  // Sparse tables and [sparse_optimizer] come together, and stay whole on every rank.
  void make_sparse_optimizer(const RunPlan& c, const RunContext& run) {
    const std::string model_name = model.component().name;
    if (sparse.empty()) {
      if (c.sparse_optimizer.component)
        throw usage_failure("[sparse_optimizer] " + c.sparse_optimizer.component->name + ": model " + model_name +
                            " has no sparse tables (LOOM_PARAM_FLAG_SPARSE_ROWS) to update; remove [sparse_optimizer]");
      return;
    }
    if (!c.sparse_optimizer.component)
      throw usage_failure("model " + model_name + " has " + std::to_string(sparse.abi().sparse_table_count) +
                          " sparse tables (\"" + sparse.abi().sparse_tables[0]->name +
                          "\", ...), which only a sparse optimizer updates; add [sparse_optimizer] with use = "
                          "\"rowwise_adagrad\" or \"lazy_adam\"");
    if (flat.sharded())
      throw usage_failure("[distributed] shard = \"" + c.distributed.shard + "\": model " + model_name +
                          " has sparse tables, which every rank keeps whole; use shard = \"none\"");
    sparse_optimizer = std::make_unique<OptimizerInstance>(c.sparse_optimizer, run, sparse.abi());
    if (!sparse_optimizer->has_sparse_step())
      throw usage_failure("[sparse_optimizer] " + c.sparse_optimizer.component->name +
                          " has no sparse_step (ABI 1.7): it updates dense buffers only; name it in [optimizer] and "
                          "use rowwise_adagrad or lazy_adam here");
  }
};

}  // namespace loom
