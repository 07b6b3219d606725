// communicator.hpp: collectives between the ranks of a data-parallel run, on LibTorch's own
// engines: ranks meet at a c10d TCPStore, and ProcessGroupGloo moves CPU tensors. Every
// failure (a rank that died, a timeout) becomes one runtime Failure that says what happened and,
// where the ranks' heartbeats tell, which ranks on which node were lost (dist/rank_liveness.hpp).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/dist_env.hpp"

namespace c10d {
class ProcessGroupGloo;
class Store;
class Work;
}  // namespace c10d

namespace loom {

class NcclComm;
class RankLiveness;

class Communicator {
 public:
  // Blocks until all world_size ranks have met, or throws after `timeout`. With nccl, CUDA
  // tensors go through NCCL on `cuda_device`; CPU tensors always go through Gloo.
  Communicator(const DistEnv& env, std::chrono::milliseconds timeout, bool nccl = false, int cuda_device = 0);
  // A group of parent's ranks (world ranks `ranks`, in group-rank order, this one among them)
  // meeting through parent's store under `name`, with parent's engines and timeout; rank() and
  // world_size() are the group's. Every rank creates the groups it belongs to in one order.
  Communicator(Communicator& parent, const std::vector<int>& ranks, const std::string& name);
  // Whether this host was built with the NCCL path (LOOM_WITH_NCCL).
  static bool nccl_available();
  ~Communicator();

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }

  void allreduce_sum(at::Tensor& t);
  void allreduce_max(at::Tensor& t);
  // Starts summing t in place without waiting; wait_all() waits for every one started.
  void start_allreduce(at::Tensor& t);
  void wait_all();
  void broadcast(at::Tensor& t, int root);
  // Starts summing t into root's t (a piece of a reduce-scatter); wait_ticket waits.
  uint64_t start_reduce(at::Tensor& t, int root);
  // Starts a broadcast without waiting; wait_ticket waits for that one (tickets, also those
  // of start_reduce, are this communicator's own; each is waited once).
  uint64_t start_broadcast(at::Tensor& t, int root);
  void wait_ticket(uint64_t ticket);
  // buffer holds world_size equal chunks: every rank's own chunk reaches every rank.
  void allgather_chunks(at::Tensor& buffer);
  // input holds world_size equal chunks along dim 0, chunk j for rank j; output (the same
  // shape) holds in chunk i what rank i sent here.
  void all_to_all(const at::Tensor& input, at::Tensor& output);
  // input (contiguous) goes to rank + 1 (the last rank's to 0); output, of the same shape,
  // receives rank - 1's: one step of a ring, every rank sending and receiving at once.
  void ring_shift(const at::Tensor& input, at::Tensor& output);
  // Point-to-point (a pipeline's activations and their gradients). start_send starts sending t
  // to rank `to` under `tag` and keeps it until wait_sends(), which waits for every send started;
  // receive fills t (of the shape and dtype sent) with what rank `from` sent under `tag`. Gloo
  // matches by tag; NCCL (CUDA tensors) by the order of a pair's calls, so send in that order.
  // CUDA tensors without NCCL travel through host memory.
  void start_send(const at::Tensor& t, int to, int tag);
  void wait_sends();
  void receive(at::Tensor& t, int from, int tag);
  // Every rank's rows (dim 0; the counts may differ by rank, the other dims may not),
  // concatenated in rank order, on every rank.
  at::Tensor allgather_rows(const at::Tensor& rows);
  // The run's c10d store, for agreement off the main thread (a sharded save's commit).
  void store_set(const std::string& key, const std::string& value);
  // Waits for every key, or throws after timeout; returns their values.
  std::vector<std::string> store_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Every rank's bytes, in rank order.
  std::vector<std::string> allgather_bytes(const std::string& mine);

 private:
  template <class Call>
  void guarded(const char* what, Call&& call);
  // Starts one collective: NCCL's for a CUDA tensor, else Gloo's work kept under a new ticket.
  template <class Nccl, class Gloo>
  uint64_t ticketed(const char* what, const at::Tensor& t, Nccl&& nccl, Gloo&& gloo);
  // Every rank registers in the store; throws naming the ranks that never did.
  void check_in(std::chrono::milliseconds timeout);

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  bool nccl_requested_ = false;
  int cuda_device_ = 0;
  c10::intrusive_ptr<c10d::Store> store_;
  // The concrete Gloo group: LibTorch 2 derives it from c10d::Backend, 1.13 from
  // c10d::ProcessGroup, and the calls made here are the same on both.
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending_;
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>> sends_;  // with what they send
  std::map<uint64_t, c10::intrusive_ptr<c10d::Work>> tickets_;  // started broadcasts
  // Reduces and broadcasts of CUDA tensors that Gloo runs on host copies: the copy, then the
  // device tensor (for a broadcast an alias of its memory) it goes back into at the wait.
  std::map<uint64_t, std::pair<at::Tensor, at::Tensor>> host_copies_;
  uint64_t next_ticket_ = 0;
  std::unique_ptr<NcclComm> nccl_;  // null unless the run uses NCCL
  std::string device_address_;      // this rank's address for Gloo: toward MASTER_ADDR
  std::shared_ptr<RankLiveness> liveness_;  // the world's, shared by its groups
};

}  // namespace loom
