// device_mesh.hpp: how the ranks of a run split into groups ([distributed] tensor_parallel and
// sequence_parallel). With T ranks per tensor-parallel group and S per sequence-parallel group,
// world rank r is tensor rank r % T, sequence rank (r / T) % S, data rank r / (T S): the T ranks
// of a tensor group are neighbours (one node's GPUs, where the per-layer all-reduces are
// cheap), a sequence group's ranks are next, and data parallelism spans the rest. Megatron-LM
// and torchtitan order their meshes the same way (tensor innermost).
//
// The ranks holding the same tensor piece (every data and sequence rank of one tensor rank)
// form the replica group: their parameters are the same, so gradients are summed and ZeRO
// shards over it. The ranks of a sequence group see the same batches, each its own piece of
// every row, so every token counts once in the replica group's sums.
#pragma once

#include <string>
#include <vector>

namespace loom {

struct DeviceMesh {
  int world_size = 1, tensor = 1, sequence = 1;  // ranks per tensor- and sequence-parallel group
  int rank = 0;                                  // this process's world rank
  // The sequence axis cuts rows for context parallelism (ring attention, [distributed]
  // context_parallel) instead of Ulysses: the same groups, other chunks and collectives.
  bool ring = false;

  int data() const { return world_size / (tensor * sequence); }  // data-parallel degree
  int tensor_rank() const { return rank % tensor; }
  int sequence_rank() const { return (rank / tensor) % sequence; }
  int data_rank() const { return rank / (tensor * sequence); }
  int replicas() const { return data() * sequence; }
  int replica_rank() const { return data_rank() * sequence + sequence_rank(); }
  // World ranks, in group-rank order.
  std::vector<int> tensor_group() const;
  std::vector<int> sequence_group() const;
  std::vector<int> replica_group() const;
  // The mesh of the rank at these places (the inverse of the *_rank() functions above).
  static DeviceMesh place(int data, int data_rank, int sequence, int sequence_rank, int tensor, int tensor_rank) {
    DeviceMesh out;
    out.world_size = data * sequence * tensor;
    out.tensor = tensor;
    out.sequence = sequence;
    out.rank = (data_rank * sequence + sequence_rank) * tensor + tensor_rank;
    return out;
  }
  // "8 ranks = data 2 x sequence 2 x tensor 2; rank 3: data 0, sequence 1, tensor 1" (a
  // degree of 1 for sequence is left out).
  std::string describe() const;
};

// Throws a usage Failure naming [distributed] tensor_parallel and sequence_parallel (or
// context_parallel, which takes the sequence axis) when their product does not divide the world
// size, or when both sequence_parallel and context_parallel are above 1 (not built).
DeviceMesh make_device_mesh(int world_size, int rank, int tensor_parallel, int sequence_parallel = 1,
                            int context_parallel = 1);

}  // namespace loom
