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
  int restart_attempt = 0;        // TORCHELASTIC_RESTART_COUNT: the agent's store outlives attempts
  std::string rdzv_id;            // LOOM_RDZV_ID: an elastic `host launch` job's name in the store
  std::string restart_reason;     // LOOM_RESTART_REASON: why `host launch` restarted the ranks
};

// Throws a usage Failure when the variables contradict each other (rank >= world size ...).
DistEnv read_dist_env();

// The key prefix of this attempt's keys in a store that outlives the ranks (an agent's: torchrun
// restarts them in place after a failure, keeping its store), so that one attempt never reads
// another's keys; torch.distributed's own env:// rendezvous uses the same prefix. Under an
// elastic `host launch` the job's id comes first, since jobs may share a master's store. ""
// without an agent's store.
std::string attempt_prefix(const DistEnv& env);

// "restart 2 by host launch (rank 3 (pid 812) exited with code 1 on vm2 (10.0.0.2))", or
// "restart 1 by torchrun's elastic agent"; "" for a first attempt.
std::string restart_description(const DistEnv& env);

// "node[01-04],gpu7" -> "node01": the first host of a Slurm node list.
std::string first_slurm_host(const std::string& nodelist);

}  // namespace loom
