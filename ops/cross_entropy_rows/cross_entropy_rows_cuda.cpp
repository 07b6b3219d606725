// The ATen side of the CUDA softmax cross-entropy rows: checks, the loss buffer, the stream. The
// arithmetic is cross_entropy_rows.cu's.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <loom_ops/cross_entropy_rows.hpp>

#include <stdexcept>
#include <string>

#include "../cuda_common/element_type_of.hpp"
#include "cross_entropy_rows_args.hpp"
#include "cross_entropy_rows_kernel.hpp"

namespace loom_ops::cuda {

at::Tensor cross_entropy_rows(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                              bool write_gradient) {
  constexpr const char* kOp = "cuda::cross_entropy_rows";
  cross_entropy_rows_detail::check_rows(logits, targets, kOp);
  check_arg(logits.is_cuda(), kOp, "logits must be on a CUDA device");
  const c10::cuda::CUDAGuard on_device(logits.device());
  const at::Tensor t = targets.contiguous();
  at::Tensor loss = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  CrossEntropyRowsParams p;
  p.type = element_type_of(logits, kOp);
  p.rows = logits.size(0);
  p.columns = logits.size(1);
  p.ignore_index = ignore_index;
  p.write_gradient = write_gradient;
  p.logits = logits.mutable_data_ptr();
  p.targets = t.const_data_ptr<int64_t>();
  p.loss = loss.mutable_data_ptr<float>();
  const cudaError_t status =
      launch_cross_entropy_rows(p, c10::cuda::getCurrentCUDAStream(logits.device().index()).stream());
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("loom_ops::cuda::cross_entropy_rows: launch failed: ") + cudaGetErrorString(status));
  return loss;
}

}  // namespace loom_ops::cuda
