// tensor_parallel_checkpoint.hpp: checkpoints of a tensor-parallel run read as whole tensors, as a
// run of one process would write them. Unsharded, the pieces of every split weight, and of the
// optimizer state that follows them element for element, are gathered over the tensor group
// before the save; with a shard mode each tensor rank's replicas write their parts and the
// reader joins them (checkpoint/sharded_checkpoint.hpp). Either way they are cut out again at
// resume. So such a checkpoint resumes on any layout (any
// tensor_parallel, any world size), and `host export`, `checkpoint inspect` and `init_from`
// read it like any other.
//
// The flat layout of a group is the same function of the model at every layout (segments in
// reverse registration order, train/flat_params.hpp); only the sizes of the split segments
// differ, by a factor T. That is what lets a piece's optimizer state be found in the whole.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/snapshot.hpp"
#include "dist/communicator.hpp"
#include "train/pipeline.hpp"

namespace loom {

// Every rank of the tensor group calls it, on snapshots captured alike: model/<name> of split
// parameters and elementwise optimizer/<state> become whole (the group's pieces in rank order).
// layout: the flat groups the states follow, when not this rank's own (pipeline stages holding
// their own layers gather one process's, train/stage_placement.hpp StagePlacement::whole_tables).
void gather_whole_tensors(Snapshot& s, Pipeline& p, Communicator& tensor_group, const SegmentTables* layout = nullptr);

// Under tensor parallelism the frozen weights' checksum (train/frozen_params.hpp), which a
// checkpoint keeps in their place, is that of the whole weights, as one process computes it:
// every rank of the tensor group calls this once, before training, and the model gets it.
void use_whole_frozen_checksum(Pipeline& p, Communicator& tensor_group);

// A split parameter made whole (the group's pieces in rank order); every rank of the tensor
// group calls it for the same parameter.
at::Tensor whole_param(const ModelParam& param, Communicator& tensor_group);

// What each part of a sharded save of a tensor-parallel run says of the split, under the
// metadata key "tensor_parallel" (checkpoint/sharded_checkpoint.hpp): {"size", "rank",
// "split": {parameter: dimension, or {"dim", "blocks"}}} (checkpoint/tensor_pieces.hpp).
nlohmann::json tensor_parallel_part(Pipeline& p, int tensor_rank, int tensor_size);

// Every split parameter whole, by name; every rank of the tensor group calls it. elsewhere: the
// pieces of the layers other pipeline stages run, gathered to this one (train/stage_placement.hpp),
// returned with their split ones made whole.
std::map<std::string, at::Tensor> gather_split_params(Pipeline& p, Communicator& tensor_group,
                                                      std::map<std::string, at::Tensor> elsewhere = {});

// The checkpoint as this rank's pieces: the inverse of gather_whole_tensors (no collective).
// Throws a runtime Failure naming a tensor whose whole size does not fit this run.
// layout as for gather_whole_tensors.
LoadedCheckpoint cut_into_pieces(const LoadedCheckpoint& whole, Pipeline& p, int tensor_rank, int tensor_size,
                                 const std::string& origin, const SegmentTables* layout = nullptr);

}  // namespace loom
