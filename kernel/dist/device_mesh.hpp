// device_mesh.hpp: how the ranks of a run split into groups ([distributed] tensor_parallel and
// sequence_parallel, pipeline_parallel). With T ranks per tensor-parallel group, S per
// sequence-parallel group and P pipeline stages, world rank r is tensor rank r % T, sequence
// rank (r / T) % S, data rank (r / (T S)) % D and pipeline stage r / (T S D): the T ranks of a
// tensor group are neighbours (one node's GPUs, where the per-layer all-reduces are cheap), a
// sequence group's ranks are next, then data parallelism, and the stages outermost (only
// activations cross between them: the slow links). Megatron-LM and torchtitan order their
// meshes the same way (tensor innermost, pipeline outermost).
//
// The ranks holding the same tensor piece (every data and sequence rank of one tensor rank)
// form the replica group: their parameters are the same, so gradients are summed and ZeRO
// shards over it. The ranks of a sequence group see the same batches, each its own piece of
// every row, so every token counts once in the replica group's sums. The stages of a pipeline
// see the same batches too, so the replica group spans the stages: it sums the gradients of what
// every stage holds (the embedding, the output layer). A stage's own layers are summed over its
// stage replicas (the replica group's ranks of that stage) when each stage holds only its layers
// (train/stage_placement.hpp); when every stage holds the whole model, it computes the gradients
// of its layers only and the replica group's sum is the whole gradient.
#pragma once

#include <string>
#include <vector>

namespace loom {

struct DeviceMesh {
  int world_size = 1, tensor = 1, sequence = 1;  // ranks per tensor- and sequence-parallel group
  int pipeline = 1;                              // pipeline stages
  int rank = 0;                                  // this process's world rank
  // The sequence axis cuts rows for context parallelism (ring attention, [distributed]
  // context_parallel) instead of Ulysses: the same groups, other chunks and collectives.
  bool ring = false;

  int data() const { return world_size / (tensor * sequence * pipeline); }  // data-parallel degree
  int tensor_rank() const { return rank % tensor; }
  int sequence_rank() const { return (rank / tensor) % sequence; }
  int data_rank() const { return (rank / (tensor * sequence)) % data(); }
  int pipeline_rank() const { return rank / (tensor * sequence * data()); }
  int replicas() const { return world_size / tensor; }
  int replica_rank() const { return rank / tensor; }
  // World ranks, in group-rank order.
  std::vector<int> tensor_group() const;
  std::vector<int> sequence_group() const;
  std::vector<int> pipeline_group() const;
  std::vector<int> replica_group() const;
  std::vector<int> stage_replica_group() const;  // the replica group's ranks of this pipeline stage
  // The mesh of the rank at these places (the inverse of the *_rank() functions above).
  static DeviceMesh place(int data, int data_rank, int sequence, int sequence_rank, int tensor, int tensor_rank,
                          int pipeline = 1, int pipeline_rank = 0) {
    DeviceMesh out;
    out.world_size = data * sequence * tensor * pipeline;
    out.tensor = tensor;
    out.sequence = sequence;
    out.pipeline = pipeline;
    out.rank = ((pipeline_rank * data + data_rank) * sequence + sequence_rank) * tensor + tensor_rank;
    return out;
  }
  // "8 ranks = pipeline 2 x data 2 x tensor 2; rank 3: pipeline 0, data 1, tensor 1" (a degree
  // of 1 for sequence or pipeline is left out).
  std::string describe() const;
};

// Throws a usage Failure naming [distributed] tensor_parallel, sequence_parallel (or
// context_parallel, which takes the sequence axis) and pipeline_parallel when their product does
// not divide the world size, or when both sequence_parallel and context_parallel are above 1
// (not built).
DeviceMesh make_device_mesh(int world_size, int rank, int tensor_parallel, int sequence_parallel = 1,
                            int context_parallel = 1, int pipeline_parallel = 1);

}  // namespace loom
