// dlpack_tensor.hpp: DLPack <-> at::Tensor for the data plane, written against DLPack's
// struct definitions (dlpack.h) rather than ATen's copy, which differs across LibTorch versions.
#pragma once

#include <ATen/ATen.h>
#include <dlpack/dlpack.h>

#include <string>

namespace loom {

// Wraps a CPU DLPack tensor without copying; takes ownership (calls its deleter when the
// tensor dies, or at once on error). `who` names the producer for messages.
at::Tensor tensor_from_dlpack(DLManagedTensor* managed, const std::string& who);

}  // namespace loom
