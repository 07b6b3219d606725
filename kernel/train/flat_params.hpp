// flat_params.hpp: parameters and gradients as views into one flat buffer per dtype and
// device (docs/design.md "One training step"). zero_grad, the global norm, clipping and the whole
// optimizer update then touch a few large tensors instead of every parameter.
//
// Segments are laid out in reverse registration order: backward produces the last layers'
// gradients first, so a prefix of the gradient buffer fills up first (data-parallel buckets).
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

#include <memory>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"

namespace loom {

class FlatParams {
 public:
  // Rebinds every parameter's storage (set_data) to a view of the flat buffer of its dtype
  // and device, and every gradient to a view of the matching gradient buffer.
  explicit FlatParams(const std::vector<ModelParam>& params);
  FlatParams(const FlatParams&) = delete;
  FlatParams& operator=(const FlatParams&) = delete;

  void zero_grad();
  // Global L2 norm of all gradients as a 0-dim tensor on the device: no host sync.
  at::Tensor grad_norm() const;
  // Scales gradients so their norm is at most max_norm, given the norm from grad_norm().
  void clip(const at::Tensor& norm, double max_norm);
  // Multiplies every gradient by a one-element tensor (on any device; no host sync).
  void scale_grads(const at::Tensor& factor);
  // The ABI view handed to the optimizer; valid as long as this object.
  const loom_param_groups& abi() const { return abi_groups_; }
  int64_t numel() const;
  // The flat parameter buffers (one per dtype and device), e.g. to broadcast them.
  std::vector<at::Tensor> param_buffers() const;
  // Contiguous slices of the gradient buffers of at most max_bytes each, in buffer order (the
  // reverse of registration: the gradients backward produces first come first).
  std::vector<at::Tensor> grad_buckets(int64_t max_bytes) const;

 private:
  struct Segment {
    std::string name;
    std::vector<int64_t> shape;
    loom_param_segment abi;
  };
  struct Group {
    at::Tensor params, grads;
    std::vector<std::unique_ptr<Segment>> segments;  // stable addresses for the ABI pointers
    std::vector<const loom_param_segment*> segment_pointers;
    loom_param_group abi;
  };
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<const loom_param_group*> group_pointers_;
  loom_param_groups abi_groups_{};
};

}  // namespace loom
