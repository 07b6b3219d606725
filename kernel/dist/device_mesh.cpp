#include "dist/device_mesh.hpp"

#include "base/failure.hpp"

namespace loom {

std::vector<int> DeviceMesh::tensor_group() const {
  std::vector<int> out;
  for (int t = 0; t < tensor; ++t) out.push_back(data_rank() * tensor + t);
  return out;
}

std::vector<int> DeviceMesh::data_group() const {
  std::vector<int> out;
  for (int d = 0; d < data(); ++d) out.push_back(d * tensor + tensor_rank());
  return out;
}

std::string DeviceMesh::describe() const {
  return std::to_string(world_size) + " rank" + (world_size == 1 ? "" : "s") + " = data " + std::to_string(data()) +
         " x tensor " + std::to_string(tensor) + "; rank " + std::to_string(rank) + ": data " +
         std::to_string(data_rank()) + ", tensor " + std::to_string(tensor_rank());
}

DeviceMesh make_device_mesh(int world_size, int rank, int tensor_parallel) {
  if (tensor_parallel < 1 || world_size % tensor_parallel != 0)
    throw usage_failure("[distributed] tensor_parallel = " + std::to_string(tensor_parallel) +
                        " does not divide the " + std::to_string(world_size) + " rank" + (world_size == 1 ? "" : "s") +
                        " of this run; launch a multiple of it, or choose a divisor of " + std::to_string(world_size));
  DeviceMesh mesh;
  mesh.world_size = world_size;
  mesh.tensor = tensor_parallel;
  mesh.rank = rank;
  return mesh;
}

}  // namespace loom
