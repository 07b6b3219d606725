// nccl_comm.hpp: collectives on CUDA tensors through NCCL's own API, for LibTorch builds that
// lack c10d's NCCL process group. Rank 0 makes the NCCL unique id and shares it through the
// run's c10d store. Built only with LOOM_WITH_NCCL (the CUDA toolkit with NCCL was found).
#pragma once

#include <ATen/ATen.h>

#include <memory>

namespace c10d {
class Store;
}

namespace loom {

class NcclComm {
 public:
  NcclComm(c10d::Store& store, int rank, int world_size, int device);
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Enqueued on the device's default stream, where LibTorch runs its kernels too, so later
  // work sees the result without a host wait.
  void allreduce(at::Tensor& t, bool max);
  void broadcast(at::Tensor& t, int root);
  // Sums t into root's t (other ranks' t is left undefined).
  void reduce(at::Tensor& t, int root);
  // buffer holds world_size equal chunks; this rank's chunk goes to every rank (in place).
  void allgather(at::Tensor& buffer);
  // input and output hold world_size equal chunks: chunk j of input goes to rank j, chunk i of
  // output comes from rank i (one grouped send and receive per peer).
  void all_to_all(const at::Tensor& input, at::Tensor& output);
  // input to rank `to`, output from rank `from`, in one group (neither waits for the other).
  // to < 0: receive only; from < 0: send only (a pipeline's messages; NCCL matches a pair's
  // sends and receives in the order they are issued).
  void send_recv(const at::Tensor& input, int to, at::Tensor& output, int from);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_, world_size_;
};

}  // namespace loom
