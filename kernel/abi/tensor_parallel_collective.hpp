// tensor_parallel_collective.hpp: the host's side of loom_host_api.tensor_parallel_collective
// (loom/model.h, ABI 1.10; the group argument, ABI 1.11). A model that splits its matrices over
// a tensor-parallel group, or its rows over a sequence- or context-parallel group, combines their pieces in
// forward and backward through it; while such a run trains, the trainer installs each group's
// collectives here (train/mesh_groups.hpp). Without one, a group of one: the output is the input.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

namespace loom {

class GroupCollectives {
 public:
  virtual ~GroupCollectives() = default;
  // New tensors; x is left as it is.
  virtual at::Tensor all_reduce(const at::Tensor& x, bool max) = 0;
  virtual at::Tensor all_gather(const at::Tensor& x) = 0;  // along dim 0, in group-rank order
  virtual at::Tensor all_to_all(const at::Tensor& x) = 0;  // dim 0's group-size chunks exchanged
  virtual at::Tensor ring_shift(const at::Tensor& x) = 0;  // x to rank + 1; rank - 1's x back
};

// One run per process: the groups of the run now training, or null.
void set_group_collectives(loom_collective_group group, GroupCollectives* calls);

// The loom_host_api.tensor_parallel_collective entry.
loom_status* tensor_parallel_collective(loom_collective_args* args);

}  // namespace loom
