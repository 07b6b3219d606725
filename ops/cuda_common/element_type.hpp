// element_type.hpp: the element types loom_ops_cuda's kernels take, named in plain C++ so that
// a kernel's params struct (its *_kernel.hpp, seen by nvcc and by the ATen side) can carry one.
#pragma once

namespace loom_ops::cuda {

enum class ElementType { float32, bfloat16, float16 };

}  // namespace loom_ops::cuda
