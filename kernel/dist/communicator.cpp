#include "dist/communicator.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/failure.hpp"
#include "dist/local_address.hpp"
#include "dist/rank_liveness.hpp"
#ifdef LOOM_WITH_NCCL
#include "dist/nccl_comm.hpp"
#else
namespace loom {
class NcclComm {};  // never created without NCCL; complete so the owning pointer can be destroyed
}  // namespace loom
#endif

namespace loom {
namespace {

// Gloo listens for its peers on `address`, this rank's own (the ranks of other nodes connect
// there), or on the interface GLOO_SOCKET_IFNAME names, as with PyTorch.
c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options(const std::string& address,
                                                                 std::chrono::milliseconds timeout) {
  auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  gloo->devices.push_back(interface != nullptr && *interface != '\0'
                              ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
                              : c10d::ProcessGroupGloo::createDeviceForHostname(address));
  return gloo;
}

// Gloo sends and receives contiguous host memory only: what to send of t (a host copy of a
// CUDA tensor), and where to receive into it (a host tensor, copied into t after the wait,
// unless t itself can take it).
at::Tensor sendable(const at::Tensor& t) { return t.is_cuda() ? t.cpu() : t.contiguous(); }
at::Tensor receivable(const at::Tensor& t) {
  return t.is_cuda() || !t.is_contiguous() ? at::empty(t.sizes(), t.options().device(at::kCPU)) : t;
}

}  // namespace

bool Communicator::nccl_available() {
#ifdef LOOM_WITH_NCCL
  return true;
#else
  return false;
#endif
}

Communicator::Communicator(const DistEnv& env, std::chrono::milliseconds timeout, bool nccl, int cuda_device)
    : env_(env), timeout_(timeout), nccl_requested_(nccl), cuda_device_(cuda_device) {
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(env.master_port);
    options.isServer = env.rank == 0 && !env.agent_store;  // under torchrun every rank is a client
    options.numWorkers = static_cast<size_t>(env.world_size);
    options.waitWorkers = false;  // ranks check in below, so a timeout can say who is missing
    options.timeout = timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    if (!attempt_prefix(env).empty()) store_ = c10::make_intrusive<c10d::PrefixStore>(attempt_prefix(env), store_);
    check_in(timeout);
    device_address_ = local_address_toward(env.master_addr);
    liveness_ = std::make_shared<RankLiveness>(env, device_address_, timeout);
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env.rank, env.world_size,
                                                         gloo_options(device_address_, timeout));
#ifdef LOOM_WITH_NCCL
    if (nccl) nccl_ = std::make_unique<NcclComm>(*store_, env.rank, env.world_size, cuda_device);
#else
    if (nccl) throw runtime_failure("this host was built without NCCL");
    (void)cuda_device;
#endif
  } catch (const Failure&) {
    throw;
  } catch (const std::exception& e) {
    const std::string message = e.what();
    throw runtime_failure("distributed: rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                          " could not meet the others at " + where + " within " +
                          std::to_string(timeout.count() / 1000) + " s (" + message.substr(0, message.find('\n')) +
                          "); check that every rank started, MASTER_ADDR/MASTER_PORT, and [distributed] timeout_s");
  }
}

Communicator::Communicator(Communicator& parent, const std::vector<int>& ranks, const std::string& name)
    : env_(parent.env_), timeout_(parent.timeout_), nccl_requested_(parent.nccl_requested_),
      cuda_device_(parent.cuda_device_), device_address_(parent.device_address_), liveness_(parent.liveness_) {
  const auto mine = std::find(ranks.begin(), ranks.end(), parent.env_.rank);
  if (mine == ranks.end())
    throw runtime_failure("distributed: rank " + std::to_string(parent.env_.rank) + " is not in its own group " + name);
  env_.rank = static_cast<int>(mine - ranks.begin());
  env_.world_size = static_cast<int>(ranks.size());
  guarded(("creating the group " + name).c_str(), [&] {
    store_ = c10::make_intrusive<c10d::PrefixStore>("loom/group/" + name, parent.store_);
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env_.rank, env_.world_size,
                                                         gloo_options(device_address_, timeout_));
#ifdef LOOM_WITH_NCCL
    if (nccl_requested_) nccl_ = std::make_unique<NcclComm>(*store_, env_.rank, env_.world_size, cuda_device_);
#endif
  });
}

Communicator::~Communicator() = default;

void Communicator::check_in(std::chrono::milliseconds timeout) {
  store_->set("loom/joined/" + std::to_string(env_.rank), std::vector<uint8_t>{1});
  std::vector<std::string> keys;
  for (int r = 0; r < env_.world_size; ++r) keys.push_back("loom/joined/" + std::to_string(r));
  try {
    store_->wait(keys, timeout);
  } catch (const std::exception&) {
    std::string missing;
    for (int r = 0; r < env_.world_size; ++r)
      if (!store_->check({keys[static_cast<size_t>(r)]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw runtime_failure("distributed: rank(s) " + missing + " of " + std::to_string(env_.world_size) +
                          " did not join within " + std::to_string(timeout.count() / 1000) +
                          " s; start every rank (or raise [distributed] timeout_s)");
  }
}

#ifdef LOOM_WITH_NCCL
#define LOOM_NCCL_OR(t, nccl_call)      \
  if (nccl_ && (t).is_cuda()) {       \
    guarded("nccl", [&] { nccl_call; }); \
    return;                            \
  }
#define LOOM_NCCL_ONLY(call) call
#else
#define LOOM_NCCL_OR(t, nccl_call)
#define LOOM_NCCL_ONLY(call)  // the stub NcclComm has no members to call
#endif

template <class Call>
void Communicator::guarded(const char* what, Call&& call) {
  try {
    call();
  } catch (const std::exception& e) {
    const std::string message = e.what();
    const std::string lost = liveness_ ? liveness_->who_is_lost() : std::string();
    throw runtime_failure(std::string("distributed: ") + what + " failed on rank " + std::to_string(env_.rank) +
                          ": " + message.substr(0, message.find('\n')) + "; " +
                          (lost.empty() ? "another rank exited or stopped responding (see its log)" : lost));
  }
}

void Communicator::allreduce_sum(at::Tensor& t) {
  LOOM_NCCL_OR(t, nccl_->allreduce(t, false));
  guarded("all-reduce", [&] {
    std::vector<at::Tensor> one{t};
    group_->allreduce(one)->wait();
  });
}

void Communicator::allreduce_max(at::Tensor& t) {
  LOOM_NCCL_OR(t, nccl_->allreduce(t, true));
  guarded("all-reduce", [&] {
    std::vector<at::Tensor> one{t};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    group_->allreduce(one, options)->wait();
  });
}

void Communicator::start_allreduce(at::Tensor& t) {
  LOOM_NCCL_OR(t, nccl_->allreduce(t, false));  // stream-ordered: nothing to wait for
  guarded("gradient all-reduce", [&] {
    std::vector<at::Tensor> one{t};
    pending_.push_back(group_->allreduce(one));
  });
}

void Communicator::wait_all() {
  guarded("gradient all-reduce", [&] {
    for (auto& work : pending_) work->wait();
  });
  pending_.clear();
}

void Communicator::broadcast(at::Tensor& t, int root) {
  LOOM_NCCL_OR(t, nccl_->broadcast(t, root));
  guarded("broadcast", [&] {
    std::vector<at::Tensor> one{t};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group_->broadcast(one, options)->wait();
  });
}

template <class Nccl, class Gloo>
uint64_t Communicator::ticketed(const char* what, const at::Tensor& t, Nccl&& nccl, Gloo&& gloo) {
  const uint64_t ticket = next_ticket_++;
#ifdef LOOM_WITH_NCCL
  if (nccl_ && t.is_cuda()) {  // stream-ordered: the ticket has nothing to wait for
    guarded("nccl", nccl);
    return ticket;
  }
#else
  (void)nccl;
  (void)t;
#endif
  guarded(what, [&] { tickets_[ticket] = gloo(); });
  return ticket;
}

uint64_t Communicator::start_reduce(at::Tensor& t, int root) {
  // Gloo in LibTorch 1.13 has no reduce-scatter: one reduce per owner's piece is the same
  // traffic, in more (but overlapping) operations. Gloo reduces CPU tensors only: a CUDA
  // tensor (ranks sharing a GPU over Gloo) goes through a host copy, and back at the wait.
  const bool through_host = t.is_cuda() && !nccl_;
  at::Tensor reduced = through_host ? t.to(at::kCPU) : t;
  const uint64_t ticket = ticketed("gradient reduce", t, [&] { LOOM_NCCL_ONLY(nccl_->reduce(t, root)); }, [&] {
    std::vector<at::Tensor> one{reduced};
    c10d::ReduceOptions options;
    options.rootRank = root;
    return group_->reduce(one, options);
  });
  if (through_host) host_copies_[ticket] = {reduced, t};
  return ticket;
}

uint64_t Communicator::start_broadcast(at::Tensor& t, int root) {
  // A CUDA tensor over Gloo (ranks sharing a GPU) goes through a host copy, as in start_reduce,
  // and comes back through an alias of its memory: shard = "parameters" gathers weights that
  // autograd saved for backward, and writing them through the tensor itself would bump their
  // version and fail the backward ("modified by an inplace operation"), where NCCL and Gloo's
  // CPU path write the memory directly.
  const bool through_host = t.is_cuda() && !nccl_;
  at::Tensor sent = t;
  if (through_host)  // the root's values to send; elsewhere a host tensor to receive into
    sent = rank() == root ? t.to(at::kCPU) : at::empty(t.sizes(), t.options().device(at::kCPU));
  const uint64_t ticket = ticketed("parameter broadcast", t, [&] { LOOM_NCCL_ONLY(nccl_->broadcast(t, root)); }, [&] {
    std::vector<at::Tensor> one{sent};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return group_->broadcast(one, options);
  });
  if (through_host && rank() != root)
    host_copies_[ticket] = {sent, at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options())};
  return ticket;
}

void Communicator::wait_ticket(uint64_t ticket) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return;  // NCCL, or already waited
  const auto work = it->second;
  tickets_.erase(it);
  guarded("reduce or broadcast", [&] { work->wait(); });
  if (const auto copy = host_copies_.find(ticket); copy != host_copies_.end()) {
    copy->second.second.copy_(copy->second.first);
    host_copies_.erase(copy);
  }
}

void Communicator::allgather_chunks(at::Tensor& buffer) {
  LOOM_NCCL_OR(buffer, nccl_->allgather(buffer));
  guarded("parameter all-gather", [&] {
    std::vector<std::vector<at::Tensor>> outputs{buffer.chunk(env_.world_size)};
    std::vector<at::Tensor> input{outputs[0][static_cast<size_t>(env_.rank)]};
    group_->allgather(outputs, input)->wait();
  });
}

void Communicator::all_to_all(const at::Tensor& input, at::Tensor& output) {
  LOOM_NCCL_OR(input, nccl_->all_to_all(input, output));
  guarded("all-to-all", [&] {
    at::Tensor in = input, out = output;
    std::vector<int64_t> equal_chunks;  // empty: world_size equal chunks of dim 0
    group_->alltoall_base(out, in, equal_chunks, equal_chunks)->wait();
  });
}

void Communicator::ring_shift(const at::Tensor& input, at::Tensor& output) {
  const int world = env_.world_size, next = (env_.rank + 1) % world, previous = (env_.rank + world - 1) % world;
  if (world == 1) {  // a ring of one hands its input back
    output.copy_(input);
    return;
  }
  LOOM_NCCL_OR(input, nccl_->send_recv(input, next, output, previous));
  guarded("ring shift", [&] {
    // CUDA tensors (ranks sharing a GPU) go through host copies, as in start_send and receive.
    std::vector<at::Tensor> sent{sendable(input)}, received{receivable(output)};
    // Gloo's send returns once the bytes are handed off, so every rank may post both first.
    const auto send = group_->send(sent, next, /*tag=*/0);
    const auto receive = group_->recv(received, previous, /*tag=*/0);
    send->wait();
    receive->wait();
    if (!received.front().is_same(output)) output.copy_(received.front());
  });
}

void Communicator::start_send(const at::Tensor& t, int to, int tag) {
  at::Tensor none;
  LOOM_NCCL_OR(t, nccl_->send_recv(t.contiguous(), to, none, -1));
  guarded("send", [&] {
    // Sends already done give their tensors back (wait() returns at once, or rethrows their
    // failure), so a step of many micro-batches does not keep every message until its end.
    const auto done = std::remove_if(sends_.begin(), sends_.end(), [](auto& s) {
      if (!s.first->isCompleted()) return false;
      s.first->wait();
      return true;
    });
    sends_.erase(done, sends_.end());
    std::vector<at::Tensor> sent{sendable(t)};
    sends_.emplace_back(group_->send(sent, to, tag), sent.front());
  });
}

void Communicator::wait_sends() {
  guarded("send", [&] {
    for (auto& [work, tensor] : sends_) work->wait();
  });
  sends_.clear();
}

void Communicator::receive(at::Tensor& t, int from, int tag) {
  at::Tensor none;
  LOOM_NCCL_OR(t, nccl_->send_recv(none, -1, t, from));
  guarded("receive", [&] {
    std::vector<at::Tensor> received{receivable(t)};
    group_->recv(received, from, tag)->wait();
    if (!received.front().is_same(t)) t.copy_(received.front());
  });
}

at::Tensor Communicator::allgather_rows(const at::Tensor& rows) {
  // Equal chunks: each rank pads its rows to the largest count; the counts say what is real.
  const int world = env_.world_size;
  at::Tensor counts = at::zeros({world}, at::kLong);
  counts[env_.rank] = rows.size(0);
  allreduce_sum(counts);
  const int64_t most = counts.max().item<int64_t>();
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = world * most;
  at::Tensor all = at::zeros(shape, rows.options());
  if (most == 0) return all;
  all.narrow(0, env_.rank * most, rows.size(0)).copy_(rows);
  allgather_chunks(all);
  std::vector<at::Tensor> real;
  for (int r = 0; r < world; ++r) real.push_back(all.narrow(0, r * most, counts[r].item<int64_t>()));
  return at::cat(real);
}

void Communicator::store_set(const std::string& key, const std::string& value) {
  guarded("store", [&] { store_->set(key, std::vector<uint8_t>(value.begin(), value.end())); });
}

std::vector<std::string> Communicator::store_wait(const std::vector<std::string>& keys,
                                                  std::chrono::milliseconds timeout) {
  std::vector<std::string> out;
  guarded("store", [&] {
    store_->wait(keys, timeout);
    for (const auto& key : keys) {
      const std::vector<uint8_t> value = store_->get(key);
      out.emplace_back(value.begin(), value.end());
    }
  });
  return out;
}

std::vector<std::string> Communicator::allgather_bytes(const std::string& mine) {
  // Sizes first, then every rank's bytes padded to the largest.
  at::Tensor sizes = at::zeros({env_.world_size}, at::kLong);
  sizes[env_.rank] = static_cast<int64_t>(mine.size());
  allreduce_sum(sizes);
  const int64_t longest = sizes.max().item<int64_t>();
  at::Tensor all = at::zeros({env_.world_size, std::max<int64_t>(longest, 1)}, at::kByte);
  if (!mine.empty()) std::memcpy(all[env_.rank].data_ptr(), mine.data(), mine.size());
  allreduce_sum(all);  // each row is zero except on its owner: the sum is a gather
  std::vector<std::string> out;
  for (int r = 0; r < env_.world_size; ++r)
    out.emplace_back(static_cast<const char*>(all[r].data_ptr()), static_cast<size_t>(sizes[r].item<int64_t>()));
  return out;
}

}  // namespace loom
