// mesh_groups.hpp: the communicators of a run's device mesh (dist/device_mesh.hpp) when it
// splits the model ([distributed] tensor_parallel, sequence_parallel, pipeline_parallel or
// expert_parallel > 1): the tensor group, the sequence group, the pipeline, the expert group,
// and the replica group over which gradients are summed or sharded. While the run trains, the tensor, sequence and expert groups
// serve the model's collectives (abi/tensor_parallel_collective.hpp, ABI 1.10 to 1.12).
//
// Expert parallelism (E ranks per group) splits the data-parallel ranks only: world rank r is
// expert rank r % E of the group of ranks E (r / E) .. E (r / E) + E - 1, which read different
// batches. The replica group stays the whole world for every parameter but the experts
// (LOOM_PARAM_FLAG_EXPERT): each rank holds its share of them, and the expert replicas (the
// ranks r with the same r % E) sum their gradients.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "abi/tensor_parallel_collective.hpp"
#include "dist/communicator.hpp"
#include "dist/device_mesh.hpp"
#include "train/run_plan.hpp"

namespace loom {

// A model's collectives over one group.
class CommunicatorCollectives final : public GroupCollectives {
 public:
  explicit CommunicatorCollectives(Communicator& group) : group_(group) {}
  at::Tensor all_reduce(const at::Tensor& x, bool max) override;
  at::Tensor all_gather(const at::Tensor& x) override;
  at::Tensor all_to_all(const at::Tensor& x) override;
  at::Tensor ring_shift(const at::Tensor& x) override;
  // Bytes this rank has handed to the others since the last call (all-to-all chunks for other
  // ranks, all-reduce and all-gather inputs once per other rank): what the model's collectives cost.
  int64_t take_sent_bytes() { return std::exchange(sent_bytes_, 0); }

 private:
  Communicator& group_;
  int64_t sent_bytes_ = 0;
};

// Throws a usage Failure naming [distributed] expert_parallel when it does not divide the world
// or comes with tensor_parallel, sequence_parallel, context_parallel or shard = "parameters" (not
// built).
void check_expert_parallel(const DistributedSettings& distributed, int world_size);

class MeshGroups {
 public:
  // Every rank calls this in step, with the world's communicator; creates the groups of more
  // than one rank and installs the model's collectives. experts: ranks per expert group.
  MeshGroups(Communicator& world, const DeviceMesh& mesh, int experts = 1);
  ~MeshGroups();
  MeshGroups(const MeshGroups&) = delete;
  MeshGroups& operator=(const MeshGroups&) = delete;

  const DeviceMesh& mesh() const { return mesh_; }
  Communicator* tensor() { return tensor_.get(); }  // null when tensor_parallel is 1
  Communicator* experts() { return expert_.get(); }  // the expert group; null when expert_parallel is 1
  Communicator* pipeline() { return pipeline_.get(); }  // this rank's pipeline; null when pipeline_parallel is 1
  // The replica group's ranks of this rank's stage; null without stages or when it is this rank alone.
  Communicator* stage_replicas() { return stage_replicas_.get(); }
  // The ranks holding this rank's experts (one per expert group); null when there is one group.
  Communicator* expert_replicas() { return expert_replicas_.get(); }
  // The replica group, handed over once (null when the mesh has one replica).
  std::unique_ptr<Communicator> take_replica_group() { return std::move(replica_); }

 private:
  DeviceMesh mesh_;
  std::unique_ptr<Communicator> tensor_, sequence_, expert_, expert_replicas_, pipeline_, stage_replicas_, replica_;
  std::unique_ptr<CommunicatorCollectives> tensor_calls_, sequence_calls_, expert_calls_;
};

}  // namespace loom
