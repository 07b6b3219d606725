#include "abi/dlpack_tensor.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/failure.hpp"

namespace loom {
namespace {

at::ScalarType scalar_type(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLInt && t.bits == 64) return at::kLong;
    if (t.code == kDLInt && t.bits == 32) return at::kInt;
    if (t.code == kDLInt && t.bits == 16) return at::kShort;
    if (t.code == kDLInt && t.bits == 8) return at::kChar;
    if (t.code == kDLUInt && t.bits == 8) return at::kByte;
    if (t.code == kDLFloat && t.bits == 32) return at::kFloat;
    if (t.code == kDLFloat && t.bits == 64) return at::kDouble;
    if (t.code == kDLFloat && t.bits == 16) return at::kHalf;
    if (t.code == kDLBfloat && t.bits == 16) return at::kBFloat16;
  }
  return at::ScalarType::Undefined;
}

DLDataType dl_type(at::ScalarType t) {
  switch (t) {
    case at::kLong: return {kDLInt, 64, 1};
    case at::kInt: return {kDLInt, 32, 1};
    case at::kShort: return {kDLInt, 16, 1};
    case at::kChar: return {kDLInt, 8, 1};
    case at::kByte: return {kDLUInt, 8, 1};
    case at::kFloat: return {kDLFloat, 32, 1};
    case at::kDouble: return {kDLFloat, 64, 1};
    case at::kHalf: return {kDLFloat, 16, 1};
    case at::kBFloat16: return {kDLBfloat, 16, 1};
    default: throw runtime_failure(std::string("tensors of dtype ") + c10::toString(t) + " cannot cross the ABI");
  }
}

// The producer is another module: a shape LibTorch would misread (negative, absurdly deep,
// overflowing its element count) or elements without data are refused before any is read.
bool plausible(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > 16 || (t.ndim > 0 && t.shape == nullptr)) return false;
  int64_t numel = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0 || (t.shape[i] > 0 && numel > INT64_MAX / t.shape[i])) return false;
    numel *= t.shape[i];
  }
  return numel == 0 || t.data != nullptr;
}

}  // namespace

DLTensorView::DLTensorView(const at::Tensor& t) : shape_(t.sizes().vec()) {
  if (!t.device().is_cpu() || !t.is_contiguous()) throw runtime_failure("DLTensorView needs a contiguous CPU tensor");
  view_.data = t.data_ptr();
  view_.device = {kDLCPU, 0};
  view_.ndim = static_cast<int32_t>(shape_.size());
  view_.dtype = dl_type(t.scalar_type());
  view_.shape = shape_.data();
  view_.strides = nullptr;  // compact row-major
  view_.byte_offset = 0;
}

at::Tensor tensor_copy_from_dltensor(const DLTensor& t, const std::string& who) {
  const at::ScalarType type = scalar_type(t.dtype);
  if (t.device.device_type != kDLCPU || type == at::ScalarType::Undefined)
    throw runtime_failure(who + ": tensors must be CPU tensors of a supported dtype");
  if (!plausible(t)) throw runtime_failure(who + ": a tensor with an invalid shape or no data");
  if (t.strides != nullptr) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expected)
        throw runtime_failure(who + ": tensors must be compact row-major");
      expected *= t.shape[i];
    }
  }
  at::Tensor out = at::empty(at::IntArrayRef(t.shape, t.ndim), at::TensorOptions().dtype(type));
  // An empty tensor may come without data; memcpy from NULL is undefined even for 0 bytes.
  if (out.nbytes() > 0) std::memcpy(out.data_ptr(), static_cast<const char*>(t.data) + t.byte_offset, out.nbytes());
  return out;
}

at::Tensor tensor_from_dlpack(DLManagedTensor* managed, const std::string& who) {
  const DLTensor& t = managed->dl_tensor;
  const at::ScalarType type = scalar_type(t.dtype);
  if (t.device.device_type != kDLCPU || type == at::ScalarType::Undefined) {
    if (managed->deleter) managed->deleter(managed);
    throw runtime_failure(who + ": DLPack tensors must be CPU tensors of a supported dtype "
                                "(int8/16/32/64, uint8, float16/32/64, bfloat16)");
  }
  if (!plausible(t)) {
    const int32_t ndim = t.ndim;  // t lives in *managed, which the deleter frees
    if (managed->deleter) managed->deleter(managed);
    throw runtime_failure(who + ": DLPack tensor with an invalid shape or no data (ndim " + std::to_string(ndim) + ")");
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
