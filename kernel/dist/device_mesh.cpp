#include "dist/device_mesh.hpp"

#include "base/failure.hpp"

namespace loom {

std::vector<int> DeviceMesh::tensor_group() const {
  std::vector<int> out;
  for (int t = 0; t < tensor; ++t) out.push_back(rank - tensor_rank() + t);
  return out;
}

std::vector<int> DeviceMesh::sequence_group() const {
  std::vector<int> out;
  for (int s = 0; s < sequence; ++s) out.push_back(rank + (s - sequence_rank()) * tensor);
  return out;
}

std::vector<int> DeviceMesh::pipeline_group() const {
  std::vector<int> out;
  const int stride = tensor * sequence * data();
  for (int p = 0; p < pipeline; ++p) out.push_back(rank + (p - pipeline_rank()) * stride);
  return out;
}

std::vector<int> DeviceMesh::replica_group() const {
  std::vector<int> out;
  for (int r = 0; r < replicas(); ++r) out.push_back(r * tensor + tensor_rank());
  return out;
}

std::vector<int> DeviceMesh::stage_replica_group() const {
  std::vector<int> out;
  const int per_stage = data() * sequence, first = pipeline_rank() * per_stage;
  for (int r = first; r < first + per_stage; ++r) out.push_back(r * tensor + tensor_rank());
  return out;
}

std::string DeviceMesh::describe() const {
  const auto n = [](int x) { return std::to_string(x); };
  const bool seq = sequence > 1;
  const bool pipe = pipeline > 1;
  const std::string axis = ring ? "context " : "sequence ";
  return n(world_size) + " rank" + (world_size == 1 ? "" : "s") + " = " + (pipe ? "pipeline " + n(pipeline) + " x " : "") +
         "data " + n(data()) + (seq ? " x " + axis + n(sequence) : "") + " x tensor " + n(tensor) + "; rank " + n(rank) +
         ": " + (pipe ? "pipeline " + n(pipeline_rank()) + ", " : "") + "data " + n(data_rank()) +
         (seq ? ", " + axis + n(sequence_rank()) : "") + ", tensor " + n(tensor_rank());
}

DeviceMesh make_device_mesh(int world_size, int rank, int tensor_parallel, int sequence_parallel,
                            int context_parallel, int pipeline_parallel) {
  const auto ranks = [](int n) { return std::to_string(n) + " rank" + (n == 1 ? "" : "s"); };
  if (context_parallel < 1)
    throw usage_failure("[distributed] context_parallel = " + std::to_string(context_parallel) + " must be 1 or more");
  if (context_parallel > 1 && sequence_parallel > 1)
    throw usage_failure("[distributed] sequence_parallel = " + std::to_string(sequence_parallel) +
                        " with context_parallel = " + std::to_string(context_parallel) + " is not built (both cut "
                        "the rows); use one of them");
  const bool ring = context_parallel > 1;
  const std::string axis = ring ? "context_parallel" : "sequence_parallel";
  if (ring) sequence_parallel = context_parallel;
  if (tensor_parallel < 1 || world_size % tensor_parallel != 0)
    throw usage_failure("[distributed] tensor_parallel = " + std::to_string(tensor_parallel) + " does not divide the " +
                        ranks(world_size) + " of this run; launch a multiple of it, or choose a divisor of " +
                        std::to_string(world_size));
  if (sequence_parallel < 1 || world_size % (tensor_parallel * sequence_parallel) != 0)
    throw usage_failure("[distributed] " + axis + " = " + std::to_string(sequence_parallel) +
                        " times tensor_parallel = " + std::to_string(tensor_parallel) + " does not divide the " +
                        ranks(world_size) + " of this run; launch a multiple of their product, or choose degrees "
                        "whose product divides " + std::to_string(world_size));
  if (pipeline_parallel < 1 || world_size % (tensor_parallel * sequence_parallel * pipeline_parallel) != 0)
    throw usage_failure("[distributed] pipeline_parallel = " + std::to_string(pipeline_parallel) + " times " + axis +
                        " = " + std::to_string(sequence_parallel) + " times tensor_parallel = " +
                        std::to_string(tensor_parallel) + " does not divide the " + ranks(world_size) +
                        " of this run; launch a multiple of their product, or choose degrees whose product divides " +
                        std::to_string(world_size));
  DeviceMesh mesh;
  mesh.world_size = world_size;
  mesh.pipeline = pipeline_parallel;
  mesh.tensor = tensor_parallel;
  mesh.sequence = sequence_parallel;
  mesh.ring = ring;
  mesh.rank = rank;
  return mesh;
}

}  // namespace loom
