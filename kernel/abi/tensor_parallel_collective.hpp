// tensor_parallel_collective.hpp: the host's side of loom_host_api.tensor_parallel_collective
// (loom/model.h, ABI 1.10). A model that splits its matrices over a tensor-parallel group
// combines their pieces in forward and backward through it; while such a run trains, the
// trainer installs the group's collectives here (train/tensor_parallel.hpp). Without one, a
// group of one: the output is the input.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

namespace loom {

class TensorParallelCollectives {
 public:
  virtual ~TensorParallelCollectives() = default;
  // New tensors; x is left as it is.
  virtual at::Tensor all_reduce(const at::Tensor& x, bool max) = 0;
  virtual at::Tensor all_gather(const at::Tensor& x) = 0;  // along dim 0, in group-rank order
};

// One run per process: the group of the run now training, or null.
void set_tensor_parallel_collectives(TensorParallelCollectives* group);

// The loom_host_api.tensor_parallel_collective entry.
loom_status* tensor_parallel_collective(loom_collective_args* args);

}  // namespace loom
