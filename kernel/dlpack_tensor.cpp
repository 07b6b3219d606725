#include "dlpack_tensor.hpp"

#include <algorithm>
#include <vector>

#include "failure.hpp"

namespace loom {
namespace {

at::ScalarType scalar_type(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLInt && t.bits == 64) return at::kLong;
    if (t.code == kDLInt && t.bits == 32) return at::kInt;
    if (t.code == kDLUInt && t.bits == 8) return at::kByte;
    if (t.code == kDLFloat && t.bits == 32) return at::kFloat;
    if (t.code == kDLFloat && t.bits == 64) return at::kDouble;
    if (t.code == kDLFloat && t.bits == 16) return at::kHalf;
    if (t.code == kDLBfloat && t.bits == 16) return at::kBFloat16;
  }
  return at::ScalarType::Undefined;
}

}  // namespace

at::Tensor tensor_from_dlpack(DLManagedTensor* managed, const std::string& who) {
  const DLTensor& t = managed->dl_tensor;
  const at::ScalarType type = scalar_type(t.dtype);
  if (t.device.device_type != kDLCPU || type == at::ScalarType::Undefined) {
    if (managed->deleter) managed->deleter(managed);
    throw runtime_failure(who + ": DLPack tensors must be CPU tensors of a supported dtype "
                                "(int64, int32, uint8, float16/32/64, bfloat16)");
  }
  std::vector<int64_t> sizes(t.shape, t.shape + t.ndim);
  std::vector<int64_t> strides;
  if (t.strides != nullptr) strides.assign(t.strides, t.strides + t.ndim);
  else {
    strides.resize(sizes.size());
    int64_t stride = 1;  // compact row-major, as DLPack defines NULL strides
    for (size_t i = sizes.size(); i-- > 0;) strides[i] = stride, stride *= std::max<int64_t>(sizes[i], 1);
  }
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return at::from_blob(
      data, sizes, strides, [managed](void*) { if (managed->deleter) managed->deleter(managed); },
      at::TensorOptions().dtype(type));
}

}  // namespace loom
