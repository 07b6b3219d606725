// DLPack batches become tensors without a copy, and their deleter runs exactly once.
#include <doctest/doctest.h>

#include <loom/dlpack.hpp>

#include "abi/dlpack_tensor.hpp"
#include "base/failure.hpp"

TEST_CASE("an int64 DLPack tensor wraps without copying and is freed once") {
  static int deleted = 0;
  DLManagedTensor* managed = loom::dlpack_int64({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto original = managed->deleter;
  static void (*forward)(DLManagedTensor*) = nullptr;
  forward = original;
  managed->deleter = [](DLManagedTensor* self) {
    ++deleted;
    forward(self);
  };
  const void* data = managed->dl_tensor.data;
  {
    at::Tensor t = loom::tensor_from_dlpack(managed, "test");
    CHECK(t.data_ptr() == data);
    CHECK(t.sizes() == at::IntArrayRef({2, 3}));
    CHECK(t[1][2].item<int64_t>() == 6);
    CHECK(deleted == 0);
  }
  CHECK(deleted == 1);
}

TEST_CASE("non-CPU DLPack tensors are refused and still freed") {
  DLManagedTensor* managed = loom::dlpack_int64({1}, {1});
  managed->dl_tensor.device = {kDLCUDA, 0};
  CHECK_THROWS_AS(loom::tensor_from_dlpack(managed, "test"), loom::Failure);
}
