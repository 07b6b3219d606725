#include "dist/dist_env.hpp"

#include <cstdlib>

#include "base/failure.hpp"

namespace loom {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, int fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const int out = std::stoi(v, &used);
    if (used == std::string(v).size()) return out;
  } catch (const std::exception&) {
  }
  throw usage_failure(std::string("environment variable ") + name + "=\"" + v + "\" is not an integer");
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  size_t end = nodelist.size(), depth = 0;  // the first comma outside brackets ends the first entry
  for (size_t i = 0; i < nodelist.size(); ++i) {
    if (nodelist[i] == '[') ++depth;
    else if (nodelist[i] == ']' && depth > 0) --depth;
    else if (nodelist[i] == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  const std::string first = nodelist.substr(0, end);
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  // "node[01-04,07]": the prefix plus the first number as written (keeps leading zeros).
  const std::string inside = first.substr(open + 1);
  return first.substr(0, open) + inside.substr(0, inside.find_first_of("-,]"));
}

DistEnv read_dist_env() {
  DistEnv e;
  if (env("WORLD_SIZE") || env("RANK")) {
    e.launcher = "torchrun";
    e.rank = env_int("RANK", 0);
    e.world_size = env_int("WORLD_SIZE", 1);
    e.local_rank = env_int("LOCAL_RANK", e.rank);
    e.local_world_size = env_int("LOCAL_WORLD_SIZE", e.world_size);
    const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
    e.agent_store = agent && std::string(agent) == "True";
    e.restart_attempt = env_int("TORCHELASTIC_RESTART_COUNT", 0);
    if (const char* id = env("LOOM_RDZV_ID")) e.rdzv_id = id;
    if (const char* reason = env("LOOM_RESTART_REASON")) e.restart_reason = reason;
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    e.launcher = "slurm";
    e.rank = env_int("SLURM_PROCID", 0);
    e.world_size = env_int("SLURM_NTASKS", 1);
    e.local_rank = env_int("SLURM_LOCALID", 0);
    e.local_world_size = env_int("SLURM_NTASKS_PER_NODE", e.world_size);
    if (const char* nodes = env("SLURM_JOB_NODELIST")) e.master_addr = first_slurm_host(nodes);
  } else if (env("OMPI_COMM_WORLD_SIZE")) {
    e.launcher = "mpi";
    e.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  }
  if (const char* addr = env("MASTER_ADDR")) e.master_addr = addr;
  e.master_port = env_int("MASTER_PORT", e.master_port);
  if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size)
    throw usage_failure("launcher variables say rank " + std::to_string(e.rank) + " of world size " +
                        std::to_string(e.world_size) + " (" + e.launcher + "); check RANK and WORLD_SIZE");
  if (e.master_port < 1 || e.master_port > 65535)
    throw usage_failure("MASTER_PORT=" + std::to_string(e.master_port) + " is not a TCP port");
  return e;
}

std::string attempt_prefix(const DistEnv& env) {
  if (!env.agent_store) return std::string();
  const std::string attempt = "attempt_" + std::to_string(env.restart_attempt);
  return env.rdzv_id.empty() ? "/worker/" + attempt : "/loom/" + env.rdzv_id + "/" + attempt;
}

std::string restart_description(const DistEnv& env) {
  if (env.restart_attempt == 0) return std::string();
  const std::string restart = "restart " + std::to_string(env.restart_attempt);
  if (env.rdzv_id.empty()) return restart + " by torchrun's elastic agent";
  return restart + " by host launch" + (env.restart_reason.empty() ? "" : " (" + env.restart_reason + ")");
}

}  // namespace loom
