// mesh_groups.hpp: the communicators of a run's device mesh (dist/device_mesh.hpp) when it
// splits the model ([distributed] tensor_parallel or sequence_parallel > 1): the tensor group,
// the sequence group, and the replica group over which gradients are summed or sharded. While
// the run trains, the tensor and sequence groups serve the model's collectives
// (abi/tensor_parallel_collective.hpp, ABI 1.10 and 1.11).
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "abi/tensor_parallel_collective.hpp"
#include "dist/communicator.hpp"
#include "dist/device_mesh.hpp"

namespace loom {

// A model's collectives over one group.
class CommunicatorCollectives final : public GroupCollectives {
 public:
  explicit CommunicatorCollectives(Communicator& group) : group_(group) {}
  at::Tensor all_reduce(const at::Tensor& x, bool max) override;
  at::Tensor all_gather(const at::Tensor& x) override;
  at::Tensor all_to_all(const at::Tensor& x) override;

 private:
  Communicator& group_;
};

class MeshGroups {
 public:
  // Every rank calls this in step, with the world's communicator; creates the groups of more
  // than one rank and installs the model's collectives.
  MeshGroups(Communicator& world, const DeviceMesh& mesh);
  ~MeshGroups();
  MeshGroups(const MeshGroups&) = delete;
  MeshGroups& operator=(const MeshGroups&) = delete;

  const DeviceMesh& mesh() const { return mesh_; }
  Communicator* tensor() { return tensor_.get(); }  // null when tensor_parallel is 1
  // The replica group, handed over once (null when the mesh has one replica).
  std::unique_ptr<Communicator> take_replica_group() { return std::move(replica_); }

 private:
  DeviceMesh mesh_;
  std::unique_ptr<Communicator> tensor_, sequence_, replica_;
  std::unique_ptr<CommunicatorCollectives> tensor_calls_, sequence_calls_;
};

}  // namespace loom
