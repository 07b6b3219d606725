// grad_sync.hpp: data-parallel gradient all-reduce that overlaps backward. The flat gradient
// buffer is cut into buckets (reverse registration order, so the gradients backward produces
// first fill the first buckets). A post-hook on each parameter's gradient accumulator counts
// the parameters still missing from each bucket; when a bucket is complete during the last
// micro-batch's backward, its all-reduce starts while backward goes on.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "dist/communicator.hpp"
#include "abi/compute_components.hpp"
#include "train/flat_params.hpp"

namespace torch::autograd {
struct Node;
}

namespace loom {

class GradientSync {
 public:
  GradientSync(const std::vector<ModelParam>& params, const FlatParams& flat, Communicator& comm, int64_t bucket_bytes);
  ~GradientSync();

  // Before the backward of the last micro-batch: buckets start as soon as they are complete.
  void arm();
  // After that backward: starts the buckets no hook started (unused parameters) and waits
  // for every all-reduce. Returns the fraction of buckets that started during backward.
  double finish();

 private:
  void on_gradient_ready(size_t param_index);

  Communicator& comm_;
  std::vector<at::Tensor> buckets_;                   // views of the flat gradient buffers
  std::vector<std::vector<size_t>> param_buckets_;    // buckets each parameter touches
  std::vector<size_t> bucket_size_;                   // parameters touching each bucket
  std::vector<size_t> missing_;                       // this step: parameters not yet ready
  std::vector<bool> started_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keeps the hooks alive
  bool armed_ = false;
  size_t started_early_ = 0;
};

}  // namespace loom
