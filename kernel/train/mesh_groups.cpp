#include "train/mesh_groups.hpp"

#include <string>
#include <vector>

#include "base/failure.hpp"

namespace loom {

at::Tensor CommunicatorCollectives::all_reduce(const at::Tensor& x, bool max) {
  sent_bytes_ += static_cast<int64_t>(x.nbytes()) * (group_.world_size() - 1);
  at::Tensor out = x.clone();
  if (max) group_.allreduce_max(out);
  else group_.allreduce_sum(out);
  return out;
}

at::Tensor CommunicatorCollectives::all_gather(const at::Tensor& x) {
  if (x.dim() == 0) throw runtime_failure("tensor_parallel_collective: all-gather takes a tensor of rank 1 or more");
  const int64_t rows = x.size(0);
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = rows * group_.world_size();
  at::Tensor out = at::empty(shape, x.options());
  out.narrow(0, group_.rank() * rows, rows).copy_(x);
  sent_bytes_ += static_cast<int64_t>(x.nbytes()) * (group_.world_size() - 1);
  group_.allgather_chunks(out);
  return out;
}

at::Tensor CommunicatorCollectives::all_to_all(const at::Tensor& x) {
  if (x.dim() == 0 || x.size(0) % group_.world_size() != 0)
    throw runtime_failure("tensor_parallel_collective: all-to-all takes a tensor whose dim 0 (" +
                          std::to_string(x.dim() == 0 ? 0 : x.size(0)) + ") the group's " +
                          std::to_string(group_.world_size()) + " ranks divide");
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  sent_bytes_ += static_cast<int64_t>(in.nbytes()) / group_.world_size() * (group_.world_size() - 1);
  group_.all_to_all(in, out);
  return out;
}

at::Tensor CommunicatorCollectives::ring_shift(const at::Tensor& x) {
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  sent_bytes_ += static_cast<int64_t>(in.nbytes());
  group_.ring_shift(in, out);
  return out;
}

void check_expert_parallel(const DistributedSettings& distributed, int world_size) {
  const int64_t experts = distributed.expert_parallel;
  if (experts == 1) return;
  const std::string what = "[distributed] expert_parallel = " + std::to_string(experts);
  if (experts < 1 || world_size % experts != 0)
    throw usage_failure(what + " does not divide the " + std::to_string(world_size) +
                        " ranks; launch a multiple of it (host launch --nproc-per-node)");
  if (distributed.tensor_parallel > 1 || distributed.sequence_parallel > 1 || distributed.context_parallel > 1)
    throw usage_failure(what + " with tensor_parallel, sequence_parallel or context_parallel > 1 is not built; use "
                        "one of them");
  if (distributed.shard == "parameters")
    throw usage_failure(what + " with shard = \"parameters\" is not built (every layer would gather every expert); "
                        "use shard = \"optimizer\" or \"gradients\"");
}

MeshGroups::MeshGroups(Communicator& world, const DeviceMesh& mesh, int experts) : mesh_(mesh) {
  // Every rank creates every group it belongs to in this order; only a group's own ranks meet
  // under its name (each group has its own store prefix).
  // Group names carry the other axes' places (the pipeline stage too when there are stages).
  const std::string stage = mesh.pipeline > 1 ? std::to_string(mesh.pipeline_rank()) + "." : "";
  const std::string place = stage + std::to_string(mesh.data_rank()) + "." + std::to_string(mesh.sequence_rank());
  if (mesh.tensor > 1) {
    tensor_ = std::make_unique<Communicator>(world, mesh.tensor_group(), "tensor" + place);
    tensor_calls_ = std::make_unique<CommunicatorCollectives>(*tensor_);
    set_group_collectives(LOOM_COLLECTIVE_GROUP_TENSOR, tensor_calls_.get());
  }
  if (mesh.sequence > 1) {
    const std::string key = stage + std::to_string(mesh.data_rank()) + "." + std::to_string(mesh.tensor_rank());
    sequence_ = std::make_unique<Communicator>(world, mesh.sequence_group(), "sequence" + key);
    sequence_calls_ = std::make_unique<CommunicatorCollectives>(*sequence_);
    // One mesh axis for both ways of cutting rows; the model asks for the group it was told of.
    set_group_collectives(mesh.ring ? LOOM_COLLECTIVE_GROUP_CONTEXT : LOOM_COLLECTIVE_GROUP_SEQUENCE,
                          sequence_calls_.get());
  }
  if (experts > 1) {
    const int first = mesh.rank / experts * experts;
    std::vector<int> ranks;
    for (int r = first; r < first + experts; ++r) ranks.push_back(r);
    expert_ = std::make_unique<Communicator>(world, ranks, "expert" + std::to_string(first / experts));
    expert_calls_ = std::make_unique<CommunicatorCollectives>(*expert_);
    set_group_collectives(LOOM_COLLECTIVE_GROUP_EXPERT, expert_calls_.get());
    // The ranks holding the same experts: one of each expert group, at the same place in it.
    std::vector<int> replicas;
    for (int r = mesh.rank % experts; r < mesh.world_size; r += experts) replicas.push_back(r);
    if (replicas.size() > 1)
      expert_replicas_ = std::make_unique<Communicator>(world, replicas, "expert_replicas" + std::to_string(mesh.rank % experts));
  }
  if (mesh.pipeline > 1) {
    const std::string key = std::to_string(mesh.data_rank()) + "." + std::to_string(mesh.sequence_rank()) + "." +
                            std::to_string(mesh.tensor_rank());
    pipeline_ = std::make_unique<Communicator>(world, mesh.pipeline_group(), "pipeline" + key);
    if (mesh.data() * mesh.sequence > 1)
      stage_replicas_ = std::make_unique<Communicator>(world, mesh.stage_replica_group(),
                                                       "stage_replicas" + stage + std::to_string(mesh.tensor_rank()));
  }
  if (mesh.replicas() > 1)
    replica_ = std::make_unique<Communicator>(world, mesh.replica_group(), "replica" + std::to_string(mesh.tensor_rank()));
}

MeshGroups::~MeshGroups() {
  set_group_collectives(LOOM_COLLECTIVE_GROUP_TENSOR, nullptr);
  set_group_collectives(LOOM_COLLECTIVE_GROUP_SEQUENCE, nullptr);
  set_group_collectives(LOOM_COLLECTIVE_GROUP_CONTEXT, nullptr);
  set_group_collectives(LOOM_COLLECTIVE_GROUP_EXPERT, nullptr);
}

}  // namespace loom
