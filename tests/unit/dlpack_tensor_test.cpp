// DLPack batches become tensors without a copy, and their deleter runs exactly once.
#include "torch_doctest.hpp"  // before any torch or doctest header

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

TEST_CASE("batch fields of every DLPack integer width cross; an impossible shape is refused and still freed") {
  const at::Tensor small = loom::tensor_from_dlpack(loom::dlpack_tensor<int8_t>({-3, 4}, {2}), "test");
  CHECK((small.scalar_type() == at::kChar));
  CHECK(small[0].item<int>() == -3);
  CHECK((loom::tensor_from_dlpack(loom::dlpack_tensor<int16_t>({7}, {1}), "test").scalar_type() == at::kShort));

  static int freed = 0;
  const auto refused = [](std::vector<int64_t> data, std::vector<int64_t> shape, auto&& spoil) {
    DLManagedTensor* managed = loom::dlpack_int64(std::move(data), std::move(shape));
    static void (*forward)(DLManagedTensor*) = nullptr;
    forward = managed->deleter;
    managed->deleter = [](DLManagedTensor* self) {
      ++freed;
      forward(self);
    };
    spoil(managed->dl_tensor);
    CHECK_THROWS_AS(loom::tensor_from_dlpack(managed, "test"), loom::Failure);
  };
  refused({1, 2}, {2}, [](DLTensor& t) { t.shape[0] = -2; });                       // negative extent
  refused({1, 2}, {2}, [](DLTensor& t) { t.data = nullptr; });                      // elements, no data
  refused({1, 2}, {1, 2}, [](DLTensor& t) { t.shape[0] = t.shape[1] = INT64_MAX; });  // overflowing count
  CHECK(freed == 3);
}
