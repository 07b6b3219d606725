// tensor_parallel.hpp: a run's tensor-parallel group ([distributed] tensor_parallel = T, ABI
// 1.10). The ranks split as the device mesh says (dist/device_mesh.hpp): the T ranks of a
// tensor group hold the pieces of one model and see the same batches; the ranks holding the
// same piece form a data-parallel group, over which gradients are all-reduced (or sharded)
// exactly as without tensor parallelism. While the run trains, the model's collectives
// (loom/tensor_parallel.hpp) reach the tensor group through abi/tensor_parallel_collective.hpp.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "abi/tensor_parallel_collective.hpp"
#include "dist/communicator.hpp"
#include "dist/device_mesh.hpp"
#include "train/flat_params.hpp"

namespace loom {

class TensorParallel final : public TensorParallelCollectives {
 public:
  // Creates the tensor group and, when the data-parallel degree is above 1, the data group,
  // from the world's communicator (every rank calls this in step); installs the collectives.
  TensorParallel(Communicator& world, const DeviceMesh& mesh);
  ~TensorParallel() override;
  TensorParallel(const TensorParallel&) = delete;
  TensorParallel& operator=(const TensorParallel&) = delete;

  const DeviceMesh& mesh() const { return mesh_; }
  Communicator& group() { return *tensor_; }  // the tensor group
  // The data-parallel group, handed over once (null when this mesh has one data rank).
  std::unique_ptr<Communicator> take_data_group() { return std::move(data_); }

  at::Tensor all_reduce(const at::Tensor& x, bool max) override;
  at::Tensor all_gather(const at::Tensor& x) override;

  // Throws a usage Failure unless the model split at least one parameter (a model that knows
  // nothing of tensor parallelism would train T copies of itself).
  static void check_model_splits(const std::vector<ModelParam>& params, const std::string& model, int tensor);
  // The names of the dense parameters each rank holds whole.
  static std::set<std::string> whole_params(const std::vector<ModelParam>& params);

  // The global gradient norm from this rank's sums of squares (all: every owned gradient;
  // whole: the part of it held whole, which every rank of the group has the same): pieces
  // count once, whole parameters once in all, not T times.
  at::Tensor grad_norm_from(const at::Tensor& all, const at::Tensor& whole);

 private:
  DeviceMesh mesh_;
  std::unique_ptr<Communicator> tensor_;
  std::unique_ptr<Communicator> data_;
};

}  // namespace loom
