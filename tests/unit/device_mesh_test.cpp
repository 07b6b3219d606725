// The device mesh (dist/device_mesh.hpp) with every axis: each rank's places invert place(), and
// the tensor, sequence, pipeline and replica groups are what their names say (members differ on
// their own axis only, every rank is in exactly one of each); degrees that do not divide the
// world are refused by name.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <set>
#include <vector>

#include "base/failure.hpp"
#include "dist/device_mesh.hpp"

using namespace loom;

namespace {

struct Places {
  int pipeline, data, sequence, tensor;
  bool operator<(const Places& o) const {
    return std::vector<int>{pipeline, data, sequence, tensor} < std::vector<int>{o.pipeline, o.data, o.sequence, o.tensor};
  }
};

Places places_of(const DeviceMesh& m) { return {m.pipeline_rank(), m.data_rank(), m.sequence_rank(), m.tensor_rank()}; }

DeviceMesh at_rank(const DeviceMesh& shape, int rank) {
  DeviceMesh m = shape;
  m.rank = rank;
  return m;
}

// Every member of rank's group `group` differs from it only where `differs` says.
void check_group(const DeviceMesh& mesh, const std::vector<int>& group, int size, bool pipeline, bool data,
                 bool sequence, bool tensor) {
  REQUIRE(static_cast<int>(group.size()) == size);
  CHECK(std::set<int>(group.begin(), group.end()).count(mesh.rank) == 1);
  const Places mine = places_of(mesh);
  std::set<Places> seen;
  for (const int r : group) {
    const Places p = places_of(at_rank(mesh, r));
    if (!pipeline) CHECK(p.pipeline == mine.pipeline);
    if (!data) CHECK(p.data == mine.data);
    if (!sequence) CHECK(p.sequence == mine.sequence);
    if (!tensor) CHECK(p.tensor == mine.tensor);
    seen.insert(p);
  }
  CHECK(static_cast<int>(seen.size()) == size);  // distinct members
}

}  // namespace

TEST_CASE("every rank of pipeline x data x sequence x tensor meshes sits where place() puts it, in groups of its axes") {
  for (const int pipeline : {1, 2, 4})
    for (const int data : {1, 2, 3})
      for (const int sequence : {1, 2})
        for (const int tensor : {1, 2}) {
          const int world = pipeline * data * sequence * tensor;
          std::set<Places> all;
          for (int rank = 0; rank < world; ++rank) {
            CAPTURE(pipeline);
            CAPTURE(data);
            CAPTURE(sequence);
            CAPTURE(tensor);
            CAPTURE(rank);
            const DeviceMesh mesh = make_device_mesh(world, rank, tensor, sequence, 1, pipeline);
            CHECK(mesh.data() == data);
            const Places p = places_of(mesh);
            all.insert(p);
            CHECK(DeviceMesh::place(data, p.data, sequence, p.sequence, tensor, p.tensor, pipeline, p.pipeline).rank == rank);
            check_group(mesh, mesh.tensor_group(), tensor, false, false, false, true);
            check_group(mesh, mesh.sequence_group(), sequence, false, false, true, false);
            check_group(mesh, mesh.pipeline_group(), pipeline, true, false, false, false);
            check_group(mesh, mesh.replica_group(), pipeline * data * sequence, true, true, true, false);
            check_group(mesh, mesh.stage_replica_group(), data * sequence, false, true, true, false);
            CHECK(mesh.replica_rank() == mesh.rank / tensor);
          }
          CHECK(static_cast<int>(all.size()) == world);
        }
}

TEST_CASE("the pipeline is the outermost axis, and degrees that do not divide the world are refused by name") {
  const DeviceMesh mesh = make_device_mesh(8, 5, 2, 1, 1, 2);
  CHECK(mesh.describe() == "8 ranks = pipeline 2 x data 2 x tensor 2; rank 5: pipeline 1, data 0, tensor 1");
  CHECK(mesh.pipeline_group() == std::vector<int>{1, 5});
  CHECK(mesh.stage_replica_group() == std::vector<int>{5, 7});
  try {
    make_device_mesh(6, 0, 2, 1, 1, 2);
    FAIL("4 does not divide 6");
  } catch (const Failure& e) {
    CHECK(std::string(e.what()).find("pipeline_parallel = 2 times sequence_parallel = 1 times tensor_parallel = 2 "
                                     "does not divide the 6 ranks") != std::string::npos);
  }
}
