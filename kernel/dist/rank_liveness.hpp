// rank_liveness.hpp: which ranks of a run are still alive, for the line a failed collective
// prints. A collective that fails (a peer's connection reset, or Gloo's timeout) does not say
// which rank was lost, and on a cluster the operator needs the node. So every rank adds 1 to a
// counter of its own in the run's store once a second, from a thread of its own over a store
// connection of its own, and when a collective fails the rank reads every counter twice, a few
// beats apart: the ranks whose counters stood still died or were cut off (those that stopped on
// an error of their own say so in the store, and are not counted). The store is served by node
// 0 (its launcher, torchrun's agent or rank 0): when it no longer answers, that node is what was
// lost.
//
// A store request to a node whose cable was pulled waits forever (c10d's client sets no socket
// timeout, and TCP retransmits for many minutes), so every request runs on a thread of its own
// that is given up, detached, after a deadline; what such a thread uses is shared with it, and
// the process ends soon after anyway.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "dist/dist_env.hpp"

namespace loom {

class RankLiveness {
 public:
  // After every rank met at the store: publishes where this rank runs (my_address) and starts
  // beating. Throws when the store cannot be reached.
  RankLiveness(const DistEnv& env, const std::string& my_address, std::chrono::milliseconds timeout);
  ~RankLiveness();
  RankLiveness(const RankLiveness&) = delete;
  RankLiveness& operator=(const RankLiveness&) = delete;

  // After a collective failed here: records that this rank stopped on its own error, then
  // watches the counters for a few beats. Returns "rank(s) 2, 3 on node7 (10.0.0.2) stopped
  // responding ...", "the run's store at A:P no longer answers: node 0, which serves it, ... is
  // lost or cut off", or "" when every rank still beats. Never throws; returns within about
  // kWatch plus two store deadlines.
  std::string who_is_lost();

  // The first finding of who_is_lost in a run, kept in the store (under the attempt's prefix)
  // for the elastic launcher to give as the reason of its restart; "" when no rank found one
  // or the store does not answer.
  static std::string recorded_loss(const c10::intrusive_ptr<c10d::Store>& store, const DistEnv& env);
  static constexpr const char* kLostKey = "loom/lost";

  static constexpr std::chrono::milliseconds kBeat{1000};
  static constexpr std::chrono::milliseconds kWatch{3000};
  static constexpr std::chrono::milliseconds kStoreDeadline{5000};

  struct State;  // the store connection and the beating's stop flag, shared with the threads

 private:
  std::shared_ptr<State> state_;
  std::thread beating_;
};

}  // namespace loom
