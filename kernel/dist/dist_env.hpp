// dist_env.hpp: where this process sits in a multi-process run, read from the variables the
// launchers set: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), then Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, first host of
// SLURM_JOB_NODELIST), then Open MPI (OMPI_COMM_WORLD_*). None set: a single process.
#pragma once

#include <string>

namespace loom {

struct DistEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "none";  // "torchrun", "slurm", "mpi" or "none"
  bool agent_store = false;       // torchrun's agent already serves the store at MASTER_PORT
};

// Throws a usage Failure when the variables contradict each other (rank >= world size ...).
DistEnv read_dist_env();

// "node[01-04],gpu7" -> "node01": the first host of a Slurm node list.
std::string first_slurm_host(const std::string& nodelist);

}  // namespace loom
