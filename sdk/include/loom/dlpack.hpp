// loom/dlpack.hpp: build DLPack tensors without LibTorch, for torch-free plugins.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <vector>

namespace loom {

// A CPU int64 tensor owning its data; whoever receives it calls its deleter once.
inline DLManagedTensor* dlpack_int64(std::vector<int64_t> data, std::vector<int64_t> shape) {
  struct Holder {
    DLManagedTensor managed;
    std::vector<int64_t> data, shape;
  };
  auto* h = new Holder{{}, std::move(data), std::move(shape)};
  DLTensor& t = h->managed.dl_tensor;
  t.data = h->data.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(h->shape.size());
  t.dtype = {kDLInt, 64, 1};
  t.shape = h->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Holder*>(self->manager_ctx); };
  return &h->managed;
}

}  // namespace loom
