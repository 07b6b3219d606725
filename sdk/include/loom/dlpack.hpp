// loom/dlpack.hpp: build DLPack tensors without LibTorch, for torch-free plugins.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace loom {

// The DLPack dtype of a C++ element type: signed and unsigned integers, float, double.
template <class T>
constexpr DLDataType dlpack_dtype() {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "dlpack_tensor takes integer or floating-point elements");
  const uint8_t code = std::is_floating_point_v<T> ? kDLFloat : std::is_signed_v<T> ? kDLInt : kDLUInt;
  return DLDataType{code, static_cast<uint8_t>(8 * sizeof(T)), 1};
}

// A compact row-major CPU tensor owning its data; whoever receives it calls its deleter once.
template <class T>
DLManagedTensor* dlpack_tensor(std::vector<T> data, std::vector<int64_t> shape) {
  struct Holder {
    DLManagedTensor managed;
    std::vector<T> data;
    std::vector<int64_t> shape;
  };
  auto* h = new Holder{{}, std::move(data), std::move(shape)};
  DLTensor& t = h->managed.dl_tensor;
  t.data = h->data.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(h->shape.size());
  t.dtype = dlpack_dtype<T>();
  t.shape = h->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Holder*>(self->manager_ctx); };
  return &h->managed;
}

inline DLManagedTensor* dlpack_int64(std::vector<int64_t> data, std::vector<int64_t> shape) {
  return dlpack_tensor<int64_t>(std::move(data), std::move(shape));
}

}  // namespace loom
