// trainer_checkpoints.cpp: the Trainer's checkpoints and exports (docs/design.md "Checkpoints"):
// saving at a step boundary (one process's layout, or each rank's part), resuming and rolling
// back (cutting a whole checkpoint into what this rank holds), and [export] folders. The run
// around them is trainer.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/failure.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "train/sparse_table_rows.hpp"
#include "train/trainer_loop.hpp"

namespace loom {

void Trainer::restore(const std::filesystem::path& path, Restore mode) {
  std::optional<RowWindow> rows;  // row-sharded tables: read this rank's rows alone
  if (p_->sparse.row_sharded()) rows = RowWindow{mesh_.rank, mesh_.world_size};
  LoadedCheckpoint loaded = checkpoints_->load(path, rows);
  if (tensor_parallel_) {  // whole tensors in the checkpoint: this rank takes its pieces (of every stage's layers)
    const std::optional<SegmentTables> layout = whole_layout();
    loaded = cut_into_pieces(loaded, *p_, tensor_parallel_->mesh().tensor_rank(), tensor_parallel_->mesh().tensor,
                             path.string(), layout ? &*layout : nullptr);
  }
  if (experts_) loaded = experts_->cut(std::move(loaded), path.string());  // every expert there: this rank's
  if (stage_placement_) loaded = stage_placement_->cut(std::move(loaded), path.string());  // this stage's layers
  if (p_->sparse.row_sharded()) cut_table_rows(loaded, *p_, mesh_.rank, mesh_.world_size, path.string());
  const RestoredRun restored = read_restored_run(loaded, path.string());
  if (mode == Restore::resume) {
    for (const auto& change :
         plan_.manifest_changes(restored.resolved_manifest, path.string(), restored.world_size, mesh_.data()))
      spdlog::info("resume: manifest changed: {}", change);
  }
  if (shards_) shards_->acquire_all();  // CUDA: memory under the whole weights to write
  restore_tensors(*p_, loaded, path.string(), {plan_.checkpoint.allow_nonfinite, plan_.checkpoint.allow_unclaimed});
  if (graphs_) graphs_->reset();  // written from outside the graphs: warm up and capture again
  if (shards_) shards_->release_all();  // the whole weights were written; keep this rank's slices
  if (p_->offload) p_->offload->parameters_written();
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
    // The trackers and the log say when the resume is an elastic agent's restart, and at what
    // world size (the operator's question after a node was lost).
    std::string note = "resumed from " + path.string() + " at step " + std::to_string(progress_.step);
    if (!restart_.empty()) note += " after " + restart_;
    if (restored.world_size != mesh_.data())
      note += ", data-parallel ranks " + std::to_string(restored.world_size) + " -> " + std::to_string(mesh_.data());
    spdlog::info("{}", note);
    for (auto& tracker : p_->trackers) tracker.note(note);
  }
  fire(LOOM_EVENT_LOAD);
}

std::string Trainer::data_state_for_this_rank(const RestoredRun& restored, const std::string& origin) const {
  if (restored.world_size == mesh_.data()) return restored.data_states.at(static_cast<size_t>(mesh_.data_rank()));
  const auto& states = restored.data_states;
  const bool differ = std::adjacent_find(states.begin(), states.end(), std::not_equal_to<>()) != states.end();
  if (differ && p_->data.has_state() && p_->data.resumes_other_world_size()) {
    spdlog::info("resume: world size {} -> {}; weights and optimizer state resharded, dataset {} deals what the {} "
                 "saved positions had left to this run's ranks", restored.world_size, mesh_.data(),
                 p_->data.component().name, states.size());
    return saved_world_record(states);
  }
  if (differ)
    throw usage_failure(origin + ": written by a run of world size " + std::to_string(restored.world_size) +
                        ", but this run has " + std::to_string(mesh_.data()) + ", and dataset " +
                        p_->data.component().name +
                        " saved a different position on each rank, which cannot be dealt out to another number of "
                        "ranks; resume with " + std::to_string(restored.world_size) + " ranks, or start a new run");
  spdlog::info("resume: world size {} -> {}; weights and optimizer state resharded, every rank continues at the "
               "saved data position", restored.world_size, mesh_.data());
  return states.front();
}

void Trainer::roll_back() {
  if (!checkpoints_) throw runtime_failure("a hook requested a rollback, but the manifest has no [checkpoint]");
  checkpoints_->wait();
  const auto path = checkpoints_->find_latest();
  if (!path) throw runtime_failure("a hook requested a rollback at step " + std::to_string(progress_.step) +
                                   ", but there is no valid checkpoint yet; save earlier ([checkpoint] every)");
  restore(*path, Restore::rollback);
}

void Trainer::save() {
  read_step_values();  // the loss decides whether this checkpoint is worth writing
  // A diverged model is not worth a checkpoint, and saving it would rotate good ones out.
  // Every rank sees the same (all-reduced) loss, so all skip together.
  if (!std::isfinite(progress_.loss)) {
    spdlog::warn("not saving a checkpoint at step {}: its loss is {}; the earlier checkpoints are kept",
                 progress_.step, progress_.loss);
    return;
  }
  std::vector<std::string> data_states = comm_ ? comm_->allgather_bytes(data_state_)
                                               : std::vector<std::string>{data_state_};
  // The stages of a pipeline read the same data: the first stage's ranks (the replica group's
  // first, dist/device_mesh.hpp) hold every data rank's position.
  if (mesh_.pipeline > 1) data_states.resize(data_states.size() / static_cast<size_t>(mesh_.pipeline));
  if (mesh_.sequence > 1) {  // the ranks of a sequence group read the same data: one position per data rank
    std::vector<std::string> per_data_rank;
    for (size_t r = 0; r < data_states.size(); r += static_cast<size_t>(mesh_.sequence))
      per_data_rank.push_back(data_states[r]);
    data_states = std::move(per_data_rank);
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(1e3 * plan_.distributed.timeout_s));
  if (stage_placement_) {
    // One process's checkpoint, written by world rank 0: the first replica of every stage sends
    // the first stage its layers (a sharded run first gathers each stage's optimizer state
    // whole); under tensor parallelism each tensor rank's pipeline does, and the first stage's
    // tensor group then joins the pieces.
    const bool first_replica = mesh_.data_rank() == 0 && mesh_.sequence_rank() == 0;
    std::optional<Snapshot> snapshot;
    if (first_replica && mesh_.pipeline_rank() == 0)
      snapshot = capture_snapshot(*p_, progress_, data_states, plan_.resolved_manifest);
    stage_placement_->save_whole(snapshot ? &*snapshot : nullptr, first_replica, comm_.get(),
                                 mesh_groups_->stage_replicas());
    if (snapshot && tensor_parallel_) {
      const SegmentTables layout = stage_placement_->whole_tables();
      gather_whole_tensors(*snapshot, *p_, tensor_parallel_->group(), &layout);
    }
    if (snapshot && mesh_.rank == 0) checkpoints_->save(std::move(*snapshot));
  } else if (comm_ && p_->flat.sharded()) {
    Snapshot part = capture_shard_part(*p_, progress_, data_states, plan_.resolved_manifest);
    if (experts_) experts_->gather_part(part, mesh_.rank == 0);
    Communicator* group = comm_.get();
    std::string part_dir;  // "": rank-<R>
    if (tensor_parallel_) {  // each tensor rank's replicas write a set of parts, committed together over the world
      nlohmann::json metadata = nlohmann::json::parse(part.metadata_json);
      metadata["tensor_parallel"] = tensor_parallel_part(*p_, mesh_.tensor_rank(), mesh_.tensor);
      part.metadata_json = metadata.dump();
      group = world();
      part_dir = tensor_folder_name(mesh_.tensor_rank()) + "/" + rank_folder_name(rank());
    }
    checkpoints_->save_part(std::move(part), *group, timeout, part_dir);
  } else if (p_->sparse.row_sharded()) {  // every rank writes its rows; rank 0 also the rest
    Snapshot part;
    part.step = progress_.step;
    if (rank() == 0) part = capture_snapshot(*p_, progress_, data_states, plan_.resolved_manifest);
    make_table_row_part(part, *p_, *world());
    checkpoints_->save_part(std::move(part), *world(), timeout);
  } else if (rank() == 0 || (experts_ && mesh_.rank < plan_.distributed.expert_parallel)) {
    // under tensor or expert parallelism, rank 0's whole group puts its pieces together
    Snapshot snapshot = capture_snapshot(*p_, progress_, data_states, plan_.resolved_manifest);
    if (tensor_parallel_) gather_whole_tensors(snapshot, *p_, tensor_parallel_->group());
    if (experts_) experts_->gather_whole(snapshot);
    if (rank() == 0 && (!tensor_parallel_ || tensor_parallel_->mesh().tensor_rank() == 0)) checkpoints_->save(std::move(snapshot));
  }
  last_saved_step_ = progress_.step;
  fire(LOOM_EVENT_SAVE);
}

std::optional<SegmentTables> Trainer::whole_layout() const {
  if (!stage_placement_) return std::nullopt;
  return stage_placement_->whole_tables();
}

void Trainer::export_now() {
  if (!tensor_parallel_ && !experts_ && !stage_placement_) return exporter_->write(progress_.step);
  std::map<std::string, at::Tensor> whole;
  if (experts_) whole = experts_->gather_params();
  if (stage_placement_) whole = stage_placement_->gather_params();  // the other stages' layers, on the first
  // the first stage's tensor group joins the pieces (each tensor rank's pipeline gathered its own)
  if (tensor_parallel_ && (!stage_placement_ || mesh_.pipeline_rank() == 0))
    whole = gather_split_params(*p_, tensor_parallel_->group(), std::move(whole));
  if (mesh_.rank == 0) exporter_->write(progress_.step, whole);
  else exporter_->gathered(progress_.step);
}

}  // namespace loom
