// elastic_rendezvous.hpp: how the launchers of an elastic `host launch` agree, round after round,
// which nodes run and in what order. It is a protocol over c10d's TCPStore (the one the launcher
// at --master-addr serves), not a transport of its own, and every key lies under
// loom/rdzv/<id>/, so that two jobs sharing a master never read each other's keys.
//
// Round r: each launcher adds 1 to round/r/joined (its place in the round) and writes what it
// brings, then waits until the round closes: at the most nodes, or once the fewest are there
// and no other arrived for the last-call time. The first launcher to see that writes the count
// with compare-and-set, so all read the same number; one whose place lies past it waits for the
// next round. While a round runs, the first launcher to see its ranks fail, or a node waiting
// in round r + 1 while there is room, writes why round r ended; every launcher polls that, stops
// its ranks and joins round r + 1 (torchrun's c10d rendezvous behaves the same way).
//
// Every request runs with a deadline (within_deadline.hpp): a store whose host was cut off is
// reported as lost instead of waited on forever.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace loom {

struct RendezvousSettings {
  std::string id;              // --rdzv-id: the job's name in the store
  int min_nodes = 1, max_nodes = 1;
  int nproc_per_node = 1;      // every node must start as many ranks
  std::chrono::seconds join_timeout{600};  // how long a round may take to gather min_nodes
  std::chrono::seconds last_call{30};      // how long to wait for more once min_nodes are there
  std::string where;           // this node, "hostname (address)", for the others' lines
};

struct RoundMembers {
  int round = 0;
  int node_rank = 0, nnodes = 1;  // this node's place, and how many nodes the round has
  std::vector<std::string> nodes;  // each node's "hostname (address)", by node rank
};

struct RoundEnd {
  bool admit = false;  // a node waits to join: a restart that uses none of --max-restarts
  std::string reason;  // "rank 3 on vm2 (10.0.0.2) exited with code 1"
};

class ElasticRendezvous {
 public:
  ElasticRendezvous(c10::intrusive_ptr<c10d::Store> store, RendezvousSettings settings);

  // Joins `round` (or, when it closed without this node, the next): returns once it closed.
  // Throws a runtime Failure when fewer than min_nodes came within join_timeout, when the nodes
  // disagree on ranks per node, or when the store stops answering.
  RoundMembers join(int round);

  // Records why `round` ended unless a launcher already did; returns what is recorded.
  RoundEnd end_round(int round, const RoundEnd& why);

  // Why `round` (of `nnodes` nodes) ended: what a launcher recorded, or an admission when a
  // node waits in the next round and the job may grow. Nothing while it goes on. Throws a
  // runtime Failure when the store stops answering.
  std::optional<RoundEnd> ended(int round, int nnodes);

  // What a launcher recorded for `round`, and nothing else: after this node's ranks ended well,
  // whether they did because another node ended the round (a stop there stops every rank at
  // the same step), so that this node restarts with the others instead of leaving the job.
  std::optional<RoundEnd> recorded_end(int round);

  // This node's ranks all ended well. The launcher that serves the store (`serving`) then waits
  // until every node of the round said so, or a launcher recorded an end, at most join_timeout:
  // its store must outlive the others' last requests.
  void finish(int round, int nnodes, bool serving);

  static constexpr std::chrono::milliseconds kPoll{200};
  static constexpr std::chrono::milliseconds kStoreDeadline{10000};

 private:
  std::string key(int round, const std::string& name) const;
  c10::intrusive_ptr<c10d::Store> store_;
  RendezvousSettings settings_;
};

}  // namespace loom
