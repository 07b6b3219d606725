// dlpack_tensor.hpp: DLPack <-> at::Tensor for the data plane, written against DLPack's
// struct definitions (dlpack.h) rather than ATen's copy, which differs across LibTorch versions.
#pragma once

#include <ATen/ATen.h>
#include <dlpack/dlpack.h>

#include <string>
#include <vector>

namespace loom {

// Wraps a CPU DLPack tensor without copying; takes ownership (calls its deleter when the
// tensor dies, or at once on error). `who` names the producer for messages.
at::Tensor tensor_from_dlpack(DLManagedTensor* managed, const std::string& who);

// A borrowed DLPack view of a contiguous CPU tensor; valid while both the tensor and this
// object live (it owns the shape array the view points to).
class DLTensorView {
 public:
  explicit DLTensorView(const at::Tensor& cpu_contiguous);
  const DLTensor* get() const { return &view_; }

 private:
  std::vector<int64_t> shape_;
  DLTensor view_{};
};

// Copies a borrowed CPU DLTensor into a new tensor (the host keeps what backends read).
at::Tensor tensor_copy_from_dltensor(const DLTensor& t, const std::string& who);

}  // namespace loom
