#include "dist/nccl_comm.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstring>
#include <vector>

#include "base/failure.hpp"

namespace loom {
namespace {

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw runtime_failure(std::string("nccl: ") + what + " failed: " + ncclGetErrorString(result) +
                          "; see NCCL_DEBUG=INFO output for the cause");
}

void check_cuda(cudaError_t result, const char* what) {
  if (result != cudaSuccess) throw runtime_failure(std::string("cuda: ") + what + " failed: " + cudaGetErrorString(result));
}

ncclDataType_t nccl_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kByte: return ncclUint8;
    default: throw runtime_failure(std::string("nccl: no NCCL type for ") + c10::toString(type));
  }
}

}  // namespace

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
};

NcclComm::NcclComm(c10d::Store& store, int rank, int world_size, int device)
    : impl_(std::make_unique<Impl>()), rank_(rank), world_size_(world_size) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  ncclUniqueId id;
  const std::string key = "loom/nccl_unique_id";
  if (rank == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store.set(key, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id)));
  } else {
    const std::vector<uint8_t> bytes = store.get(key);  // waits up to the store's timeout
    if (bytes.size() != sizeof(id)) throw runtime_failure("nccl: the unique id in the store has the wrong size");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  check_nccl(ncclCommInitRank(&impl_->comm, world_size, id, rank), "ncclCommInitRank");
}

NcclComm::~NcclComm() {
  if (impl_ && impl_->comm) ncclCommDestroy(impl_->comm);
}

void NcclComm::allreduce(at::Tensor& t, bool max) {
  if (!t.is_cuda() || !t.is_contiguous()) throw runtime_failure("nccl: all-reduce needs a contiguous CUDA tensor");
  check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.scalar_type()),
                           max ? ncclMax : ncclSum, impl_->comm, /*stream=*/nullptr),
             "ncclAllReduce");
}

void NcclComm::broadcast(at::Tensor& t, int root) {
  if (!t.is_cuda() || !t.is_contiguous()) throw runtime_failure("nccl: broadcast needs a contiguous CUDA tensor");
  check_nccl(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.scalar_type()),
                           root, impl_->comm, /*stream=*/nullptr),
             "ncclBroadcast");
}

void NcclComm::reduce(at::Tensor& t, int root) {
  if (!t.is_cuda() || !t.is_contiguous()) throw runtime_failure("nccl: reduce needs a contiguous CUDA tensor");
  check_nccl(ncclReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t.scalar_type()), ncclSum,
                        root, impl_->comm, /*stream=*/nullptr),
             "ncclReduce");
}

void NcclComm::allgather(at::Tensor& buffer) {
  if (!buffer.is_cuda() || !buffer.is_contiguous() || buffer.numel() % world_size_ != 0)
    throw runtime_failure("nccl: all-gather needs a contiguous CUDA buffer of world_size equal chunks");
  const int64_t chunk = buffer.numel() / world_size_;
  // In place: NCCL allows sendbuff == recvbuff + rank * sendcount.
  const at::Tensor mine = buffer.narrow(0, chunk * rank_, chunk);
  check_nccl(ncclAllGather(mine.data_ptr(), buffer.data_ptr(), static_cast<size_t>(chunk),
                           nccl_type(buffer.scalar_type()), impl_->comm, /*stream=*/nullptr),
             "ncclAllGather");
}

void NcclComm::all_to_all(const at::Tensor& input, at::Tensor& output) {
  if (!input.is_cuda() || !input.is_contiguous() || !output.is_contiguous() || input.numel() != output.numel() ||
      input.numel() % world_size_ != 0)
    throw runtime_failure("nccl: all-to-all needs contiguous CUDA tensors of world_size equal chunks");
  const size_t chunk = static_cast<size_t>(input.numel() / world_size_);
  const size_t bytes = chunk * input.element_size();
  const ncclDataType_t type = nccl_type(input.scalar_type());
  const auto* from = static_cast<const char*>(input.data_ptr());
  auto* to = static_cast<char*>(output.data_ptr());
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < world_size_; ++peer) {
    check_nccl(ncclSend(from + peer * bytes, chunk, type, peer, impl_->comm, /*stream=*/nullptr), "ncclSend");
    check_nccl(ncclRecv(to + peer * bytes, chunk, type, peer, impl_->comm, /*stream=*/nullptr), "ncclRecv");
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
}

void NcclComm::send_recv(const at::Tensor& input, int to, at::Tensor& output, int from) {
  const auto usable = [](const at::Tensor& t) { return t.is_cuda() && t.is_contiguous(); };
  if ((to >= 0 && !usable(input)) || (from >= 0 && !usable(output)) ||
      (to >= 0 && from >= 0 && (input.numel() != output.numel() || input.scalar_type() != output.scalar_type())))
    throw runtime_failure("nccl: send/receive needs contiguous CUDA tensors of one size and dtype");
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  if (to >= 0)
    check_nccl(ncclSend(input.data_ptr(), static_cast<size_t>(input.numel()), nccl_type(input.scalar_type()), to,
                        impl_->comm, /*stream=*/nullptr), "ncclSend");
  if (from >= 0)
    check_nccl(ncclRecv(output.data_ptr(), static_cast<size_t>(output.numel()), nccl_type(output.scalar_type()), from,
                        impl_->comm, /*stream=*/nullptr), "ncclRecv");
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
}

}  // namespace loom
