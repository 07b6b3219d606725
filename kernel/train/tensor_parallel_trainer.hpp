// tensor_parallel_trainer.hpp: what the trainer does for a tensor-parallel model ([distributed]
// tensor_parallel = T, ABI 1.10). The ranks split as the device mesh says
// (dist/device_mesh.hpp): the T ranks of a tensor group hold the pieces of one model and see
// the same batches; the ranks holding the same piece form the replica group, over which
// gradients are all-reduced (or sharded) exactly as without tensor parallelism. The model's
// collectives (loom/tensor_parallel.hpp) reach the tensor group through train/mesh_groups.hpp.
#pragma once

#include <ATen/ATen.h>

#include <set>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "dist/communicator.hpp"
#include "dist/device_mesh.hpp"
#include "train/flat_params.hpp"

namespace loom {

class TensorParallel final {
 public:
  // group: the tensor group (train/mesh_groups.hpp), which outlives this.
  TensorParallel(Communicator& group, const DeviceMesh& mesh) : mesh_(mesh), tensor_(group) {}

  const DeviceMesh& mesh() const { return mesh_; }
  Communicator& group() { return tensor_; }

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
  Communicator& tensor_;
};

}  // namespace loom
