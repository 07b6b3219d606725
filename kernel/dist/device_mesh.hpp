// device_mesh.hpp: how the ranks of a run split into groups ([distributed] tensor_parallel).
// With T ranks per tensor-parallel group, world rank r is tensor rank r % T of data rank r / T:
// the T ranks of one group are neighbours (one node's GPUs, where the per-layer all-reduces
// are cheap), and each data-parallel group holds one rank of every tensor group. Megatron-LM
// and torchtitan order their meshes the same way (tensor innermost).
#pragma once

#include <string>
#include <vector>

namespace loom {

struct DeviceMesh {
  int world_size = 1, tensor = 1;  // tensor: ranks per tensor-parallel group
  int rank = 0;                    // this process's world rank

  int data() const { return world_size / tensor; }  // data-parallel degree
  int tensor_rank() const { return rank % tensor; }
  int data_rank() const { return rank / tensor; }
  // World ranks, in group-rank order.
  std::vector<int> tensor_group() const;
  std::vector<int> data_group() const;
  // "4 ranks = data 2 x tensor 2; rank 3: data 1, tensor 1"
  std::string describe() const;
};

// Throws a usage Failure naming [distributed] tensor_parallel when it is not a divisor of the
// world size.
DeviceMesh make_device_mesh(int world_size, int rank, int tensor_parallel);

}  // namespace loom
