// `host launch`: starts the ranks of a run on this node without Python (cli/local_ranks.hpp).
// Node 0's launcher serves the ranks' store (as torchrun's agent does, so the ranks find it with
// TORCHELASTIC_USE_AGENT_STORE), and holds its port from before the ranks start until they end.
// The launcher forwards SIGINT and SIGTERM, and when one rank fails it says which and stops the
// others. When the launcher itself dies (SIGKILL, an OOM kill), the kernel tells every rank,
// which then ends (base/signals.hpp).
//
// Elastic (--nnodes MIN:MAX, --max-restarts K or --rdzv-id): the launchers meet round after
// round in dist/elastic_rendezvous.hpp, which numbers the nodes; when a round's ranks fail, or a
// node waits to join while there is room, every launcher stops its ranks and meets the others
// again, and the new ranks resume from the newest valid checkpoint at the new world size.
#include <signal.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "base/failure.hpp"
#include "cli/commands.hpp"
#include "cli/local_ranks.hpp"
#include "dist/elastic_rendezvous.hpp"
#include "dist/local_address.hpp"
#include "dist/rank_liveness.hpp"

namespace loom {
namespace {

volatile std::sig_atomic_t g_forward = 0;
void remember_signal(int signo) { g_forward = signo; }

constexpr auto kLook = std::chrono::milliseconds(20);

// The rendezvous store of this node's ranks, served by the launcher itself (as torchrun's agent
// serves it) on the named port, or on one the kernel assigns when none is named. The launcher
// holds the listening socket from before the ranks start until they have all ended: a port found
// free and released for rank 0 to bind later could be taken in between, by any process's
// outgoing connection (Gloo's own, of a job beside this one) when it lies in the ephemeral range.
c10::intrusive_ptr<c10d::TCPStore> serve_store(int port) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  try {
    return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    throw runtime_failure("launch: cannot serve the ranks' store on port " + std::to_string(port) + " (" +
                          message.substr(0, message.find('\n')) + "); pass a free --master-port");
  }
}

c10::intrusive_ptr<c10d::TCPStore> join_store(const std::string& addr, int port, std::chrono::seconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(addr, options);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    throw runtime_failure("launch: no rendezvous store answered at " + addr + ":" + std::to_string(port) + " within " +
                          std::to_string(timeout.count()) + " s (" + message.substr(0, message.find('\n')) +
                          "); start the launcher on --master-addr's machine, or check the address and port");
  }
}

// Elastic: the launcher on --master-addr's machine serves the store, and the others (also a
// second launcher on that machine, whose bind fails) are its clients, as with torchrun's c10d
// rendezvous; `serving` says which this one became. The store lives as long as the launcher
// serving it.
c10::intrusive_ptr<c10d::TCPStore> serve_or_join_store(const CommandLine& o, std::chrono::seconds timeout,
                                                      bool& serving) {
  serving = false;
  if (is_this_machine(o.master_addr)) {
    try {
      auto store = serve_store(o.master_port);
      std::fprintf(stderr, "launch: serving the rendezvous store on port %d\n", static_cast<int>(store->getPort()));
      serving = true;
      return store;
    } catch (const Failure&) {
      // Taken: another launcher of this machine serves it (or another program: then the join fails).
    }
  }
  return join_store(o.master_addr, o.master_port, timeout);
}

void forward_signals() {
  struct sigaction action{};
  action.sa_handler = &remember_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// Runs one set of ranks to its end: forwards signals, names the first failure. Returns the
// launcher's exit code.
int run_fixed(const std::vector<std::string>& child_args, const RankStart& start) {
  LocalRanks ranks(child_args, start);
  bool said = false;
  while (ranks.running()) {
    if (g_forward) {
      ranks.signal_all(g_forward);
      g_forward = 0;
    }
    ranks.poll();
    if (!said && !ranks.failure().empty()) {
      std::fprintf(stderr, "error: launch: %s; stopping the other ranks\n", ranks.failure().c_str());
      said = true;
    }
    std::this_thread::sleep_for(kLook);
  }
  return ranks.exit_code();
}

// What the ranks of an elastic round see in their environment, for the keys they write.
DistEnv ranks_env(const std::string& rdzv_id, int round) {
  DistEnv env;
  env.agent_store = true;
  env.rdzv_id = rdzv_id;
  env.restart_attempt = round;
  return env;
}

struct NodeCount {
  int min = 1, max = 1;
};

// "3" or "2:4".
NodeCount parse_nnodes(const std::string& text) {
  const auto number = [&](const std::string& part) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || part.empty() || value < 1)
      throw usage_failure("launch: --nnodes " + text + " is not a node count M or a range MIN:MAX (such as 2:4)");
    return value;
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return {number(text), number(text)};
  NodeCount out{number(text.substr(0, colon)), number(text.substr(colon + 1))};
  if (out.min > out.max) throw usage_failure("launch: --nnodes " + text + ": MIN is above MAX");
  return out;
}

int run_elastic(const CommandLine& o, const NodeCount& nodes) {
  RendezvousSettings settings;
  settings.id = o.rdzv_id.empty() ? "none" : o.rdzv_id;
  settings.min_nodes = nodes.min;
  settings.max_nodes = nodes.max;
  settings.nproc_per_node = o.nproc_per_node;
  settings.join_timeout = std::chrono::seconds(o.rdzv_timeout);
  settings.last_call = std::chrono::seconds(o.rdzv_last_call);
  bool serving = false;
  const auto store = serve_or_join_store(o, settings.join_timeout, serving);
  const int port = static_cast<int>(store->getPort());
  settings.where = describe_node(local_address_toward(o.master_addr));
  ElasticRendezvous rendezvous(store, settings);

  int round = 0, restarts = 0, world_before = 0;
  std::string restart_reason;
  for (;;) {
    std::fprintf(stderr, "launch: rendezvous '%s' round %d: waiting for %d to %d nodes\n", settings.id.c_str(), round,
                 nodes.min, nodes.max);
    const RoundMembers members = rendezvous.join(round);
    round = members.round;
    // A node that waited out the round before joins knowing why it ended (it ended before this
    // round could close), so its ranks' resume note says so too.
    if (round > 0 && restart_reason.empty())
      if (const auto before = rendezvous.ended(round - 1, members.nnodes)) restart_reason = before->reason;
    const int world = members.nnodes * o.nproc_per_node;
    const std::string was = world_before ? " (was " + std::to_string(world_before) + ")" : "";
    std::string nodes;
    for (const std::string& node : members.nodes) nodes += (nodes.empty() ? "" : ", ") + node;
    std::fprintf(stderr, "launch: round %d: %d node(s), world size %d%s; this is node %d of %s\n", round,
                 members.nnodes, world, was.c_str(), members.node_rank, nodes.c_str());
    RankStart start{members.node_rank, o.nproc_per_node, world, o.master_addr, port, {}};
    start.more_environment = {{"TORCHELASTIC_RESTART_COUNT", std::to_string(round)}, {"LOOM_RDZV_ID", settings.id}};
    if (!restart_reason.empty()) start.more_environment.emplace_back("LOOM_RESTART_REASON", restart_reason);

    LocalRanks ranks(o.child_args, start);
    std::optional<RoundEnd> end;
    bool interrupted = false;
    auto next_look = std::chrono::steady_clock::now();
    while (ranks.running()) {
      if (g_forward) {
        ranks.signal_all(g_forward);
        if (!end) end = rendezvous.end_round(round, {false, settings.where + "'s launcher was stopped by a signal"});
        interrupted = true;
        g_forward = 0;
      }
      ranks.poll();
      if (!end && !ranks.failure().empty()) {
        // The ranks' own finding, when they lost a peer, says more than their exit code.
        const std::string lost = RankLiveness::recorded_loss(store, ranks_env(settings.id, round));
        end = rendezvous.end_round(round, {false, ranks.failure() + " on " + settings.where + (lost.empty() ? "" : ": " + lost)});
        std::fprintf(stderr, "error: launch: %s; stopping the other ranks\n", ranks.failure().c_str());
      }
      if (!end && std::chrono::steady_clock::now() >= next_look) {
        next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
        end = rendezvous.ended(round, members.nnodes);
        if (end) {
          std::fprintf(stderr, "launch: round %d ended: %s; stopping this node's ranks\n", round, end->reason.c_str());
          ranks.stop(std::chrono::seconds(10));
        }
      }
      std::this_thread::sleep_for(kLook);
    }
    if (interrupted) return ranks.exit_code();
    if (!end) {
      // Ranks that ended well may have been stopped with the others' (the run stops every rank
      // at one step) because another node ended the round between two looks: go with it.
      try {
        end = rendezvous.recorded_end(round);
      } catch (const Failure&) {
        // The serving node already went: its ranks ended well too.
      }
      if (end)
        std::fprintf(stderr, "launch: round %d ended: %s; this node's ranks stopped with the others\n", round,
                     end->reason.c_str());
    }
    if (!end) {  // every rank here ended well
      try {
        rendezvous.finish(round, members.nnodes, serving);
      } catch (const Failure&) {
        // The serving node already went: nothing waits for this one's word.
      }
      return ranks.exit_code();
    }
    if (!end->admit && ++restarts > o.max_restarts) {
      std::fprintf(stderr, "error: launch: round %d ended (%s) and --max-restarts %d are used up\n", round,
                   end->reason.c_str(), o.max_restarts);
      return ranks.exit_code() ? ranks.exit_code() : static_cast<int>(ExitCode::runtime);
    }
    restart_reason = end->reason;
    world_before = world;
    ++round;
    if (end->admit)
      std::fprintf(stderr, "launch: restarting to admit a node (not counted in --max-restarts): %s\n",
                   end->reason.c_str());
    else
      std::fprintf(stderr, "launch: restart %d of %d: %s\n", restarts, o.max_restarts, end->reason.c_str());
  }
}

}  // namespace

int command_launch(const CommandLine& o) {
  if (o.nproc_per_node < 1 || o.node_rank < 0)
    throw usage_failure("launch: need --nproc-per-node >= 1 and --node-rank >= 0");
  if (o.child_args.empty() || o.child_args[0] != "run")
    throw usage_failure("usage: host launch --nproc-per-node N [options] -- run MANIFEST [--set KEY=VALUE]...");
  if (o.max_restarts < 0 || o.rdzv_timeout < 1 || o.rdzv_last_call < 0)
    throw usage_failure("launch: need --max-restarts >= 0, --rdzv-timeout >= 1 and --rdzv-last-call >= 0");
  const NodeCount nodes = parse_nnodes(o.nnodes);
  const bool elastic = nodes.min != nodes.max || o.max_restarts > 0 || !o.rdzv_id.empty();
  if (nodes.max > 1 && o.master_port == 0)
    throw usage_failure("launch: with --nnodes above 1 every node needs the same --master-port");
  forward_signals();
  if (elastic) {
    if (o.node_rank != 0)
      throw usage_failure("launch: with --nnodes MIN:MAX, --max-restarts or --rdzv-id the rendezvous numbers the "
                          "nodes; leave --node-rank out");
    return run_elastic(o, nodes);
  }
  if (o.node_rank >= nodes.max) throw usage_failure("launch: need 0 <= --node-rank < --nnodes");
  // Node 0's launcher serves the store; the ranks (also rank 0) are its clients.
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (o.node_rank == 0) store = serve_store(o.master_port);
  const int port = store ? static_cast<int>(store->getPort()) : o.master_port;
  return run_fixed(o.child_args, RankStart{o.node_rank, o.nproc_per_node, nodes.max * o.nproc_per_node,
                                           o.master_addr, port, {}});
}

}  // namespace loom
