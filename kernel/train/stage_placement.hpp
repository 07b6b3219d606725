// stage_placement.hpp: pipeline stages that hold their own layers only ([distributed]
// pipeline_parallel = P > 1). A stage keeps the parameters of the layers it runs (ModelParam::unit,
// ABI 1.5 and 1.17) and what lies outside layers (the embedding, the final norm, the output
// layer: a tied output layer then needs nothing more); the other layers' parameters, trainable or
// frozen, are given back before the flat buffers exist (ModelInstance::give_to_other_stages), so a
// stage's weights, gradients and optimizer state are its layers' share of the model's.
//
// The layers' parameters fill the flat buffers' placed groups (train/flat_params.hpp, ShardSpec::
// stage_layers): their gradients are summed over the stage's replicas, what lies outside layers
// over the replica group spanning the stages (the stages that do not use it add zeros), and the
// gradient norm adds the placed groups' squares over the pipeline (train/grad_sync.hpp). ZeRO
// ([distributed] shard = "optimizer" or "gradients") cuts what lies outside layers among the
// replica group and a stage's layers among that stage's replicas (ShardSpec::placed_world_size),
// so a rank keeps optimizer state (and, reducing to owners, gradients) for 1/(data x sequence) of
// its stage's layers.
//
// Checkpoints keep one process's layout, so that a run resumes at any P or layout: at a save the
// first stage receives every other stage's layers, with the elementwise optimizer state that
// follows them (a sharded run gathers each state whole over its ranks first, for the moment of the
// save), and writes model/<param> and optimizer/<state> as one process does. One process
// has no placed groups: a placed group's state is saved under the name the optimizer gave the
// same place in the other group of its dtype and device (which one process's layout continues).
// At a resume each stage cuts its own share out of the whole. Under tensor parallelism all of this
// happens in each tensor rank's pieces (its own pipeline group), and the first stage's tensor
// group joins them (train/tensor_parallel_checkpoint.hpp, with whole_tables as the layout).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/snapshot.hpp"
#include "dist/communicator.hpp"
#include "train/pipeline.hpp"

namespace loom {

// Why the stages of this run hold the whole model rather than their own layers, or "" when they
// can hold their own: what is not built with it yet (ZeRO-3), a model that declares no layer of
// its parameters, or a model whose trainable parameters outside layers do not span every dtype
// its layers use (the optimizer's groups would then not line up with one process's; none at all
// is fine when the layers are of one dtype, as LoRA's adapters are).
std::string why_stages_hold_whole_model(const RunPlan& plan, ModelInstance& model);

// The parameters of the layers other stages run, trainable or frozen: stage_of_layer[l] is the
// pipeline rank that runs layer l (train/stage_runner.hpp stage_of_each_layer).
std::set<std::string> other_stages_layers(ModelInstance& model, const std::vector<int>& stage_of_layer, int stage);

// The frozen weights' checksum as one process computes it (train/frozen_params.hpp) when each
// stage holds its own layers' frozen weights only: the hash's state travels along the pipeline
// in registration order, each stage adding the frozen tensors it holds (what lies outside layers
// by the stage holding the state then), and every stage gets the result, which it sets on the
// model. Every rank of the pipeline calls it at the same point. tensor_group: under tensor
// parallelism, over which a stage's split weights are gathered whole to be hashed (null without).
void use_chained_frozen_checksum(ModelInstance& model, Communicator& pipeline, const std::vector<int>& stage_of_layer,
                                 Communicator* tensor_group);

class StagePlacement {
 public:
  // Every stage builds it once its flat buffers exist; pipeline: the ranks of one pipeline (a
  // stage each); stage_of_layer as above. Throws a runtime Failure when the optimizer's state
  // does not line up between the placed groups and the others.
  StagePlacement(Pipeline& p, Communicator& pipeline, std::vector<int> stage_of_layer);

  // Every rank of the replica group calls it in step at a save. A sharded run's elementwise
  // optimizer states are first gathered whole (over replicas for what lies outside layers, over
  // stage_replicas for the stage's layers: null where a rank is alone); then the first replica of
  // each stage (sends) sends its layers and their state to the first stage, whose s (world rank
  // 0's own capture; null elsewhere) ends up holding every layer's model/<param> and the
  // optimizer's elementwise state in one process's layout.
  void save_whole(Snapshot* s, bool sends, Communicator* replicas, Communicator* stage_replicas);
  // The weights of every layer the first stage does not run (frozen ones too, unless
  // with_frozen is false), by name, on the first stage (empty on the others): with its own, the
  // whole model ([export]). Every rank of the pipeline calls it with the same with_frozen.
  std::map<std::string, at::Tensor> gather_params(bool with_frozen = true);
  // A whole checkpoint (one process's layout) as this stage holds it (no collective). Throws a
  // runtime Failure naming origin when its tensors do not fit the model.
  LoadedCheckpoint cut(LoadedCheckpoint whole, const std::string& origin) const;
  // One process's flat groups (in its order, each its segments in its order): the layout of what
  // save_whole gathers and cut reads, in this rank's tensor pieces under tensor parallelism.
  SegmentTables whole_tables() const;
  // "12345 of 40960 trainable parameters (its layers' and 3 tensors outside layers)", and in a
  // sharded run ", of which this rank's optimizer updates 6200 (shard = "gradients")"
  std::string describe() const;

 private:
  struct Segment {
    std::string name;
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int stage = -1;  // the pipeline rank holding it; -1: outside layers, every stage holds it
  };
  struct WholeGroup {  // one of one process's flat groups
    std::string key;   // device and dtype
    std::vector<Segment> segments;  // in one process's order
    int64_t numel = 0;
  };
  struct LocalState {                // an elementwise state tensor of this stage's optimizer
    size_t index = 0;                // in the optimizer's state()
    size_t group = 0;                // its flat group here
    size_t whole_group = 0;
    std::string whole_name;          // its name in one process's layout
  };
  // The first stage's s receives the other stages' layers and states (the others pass null and
  // send theirs); every rank of the pipeline calls it in step.
  void gather_whole(Snapshot* s);
  // A sharded run's elementwise states of this stage's groups, each gathered whole into
  // gathered_ (collectives over the ranks each group is cut among).
  void gather_sharded_state(Communicator* replicas, Communicator* stage_replicas);
  // An elementwise state over its whole local group: gathered_ or the optimizer's own tensor.
  const at::Tensor& whole_state(size_t index) const;
  // This stage's values of the whole group's segments held by `stage` (concatenated in one
  // process's order): the parameters (state null) or an elementwise state.
  at::Tensor pieces_of(size_t whole_group, int stage, const LocalState* state) const;
  int64_t numel_held_by(size_t whole_group, int stage) const;
  // The first stage receives each other stage's pieces_of(whole_group, that stage, layer_state)
  // (of like's dtype and device; undefined where a stage holds none); the others send theirs and
  // get nothing back. Every rank of the pipeline calls it with the same tag.
  std::vector<at::Tensor> exchange(size_t whole_group, const LocalState* layer_state, const at::Tensor& like, int tag);
  // The local group and offset of a segment this stage holds; (-1, 0) when it holds none.
  std::pair<int64_t, int64_t> local_place(const std::string& name) const;

  Pipeline& p_;
  Communicator& pipeline_;
  std::vector<int> stage_of_layer_;
  std::vector<WholeGroup> whole_;
  std::vector<size_t> whole_group_of_local_;      // per local flat group
  std::map<std::string, std::pair<int64_t, int64_t>> local_place_;  // name -> (local group, offset)
  std::vector<LocalState> states_;
  std::vector<std::vector<std::string>> whole_state_names_;  // per whole group: its elementwise states' names
  std::vector<Segment> frozen_layers_;  // frozen layer weights ([lora], [model] freeze), in registration order
  std::vector<at::Tensor> gathered_;     // per optimizer state: whole, while a sharded run saves
};

}  // namespace loom
