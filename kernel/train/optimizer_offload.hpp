// optimizer_offload.hpp: [distributed] offload = "optimizer", ZeRO-Offload's split of the
// step (Ren et al. 2021): the optimizer updates a copy of this rank's parameter slices in host
// memory, so its state (AdamW's two moments: 8 bytes a parameter in fp32) lives there and
// never on the device. Each step the reduced, clipped gradients come to the host, the
// optimizer runs on the CPU, and the updated slices go back before the next forward.
//
// The copies mirror FlatParams' optimizer view group for group (same dtype, same segment
// table), so the optimizer cannot tell them apart and its checkpointed state is the same as
// without offload. On CUDA the host buffers are pinned, so the copy back is asynchronous on
// the step's stream; the next step's gradient copy waits for it (same stream) before the
// optimizer writes the copies again.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

#include <memory>
#include <vector>

#include "train/flat_params.hpp"

namespace loom {

class OptimizerOffload {
 public:
  // Host copies of every group of flat's optimizer view; the parameters are read at the first
  // step (after init_from and any resume wrote them).
  explicit OptimizerOffload(const FlatParams& flat);
  OptimizerOffload(const OptimizerOffload&) = delete;
  OptimizerOffload& operator=(const OptimizerOffload&) = delete;

  // The view to create the optimizer with; valid as long as this object.
  const loom_param_groups& abi() const { return abi_groups_; }
  // Before the optimizer's step: the gradients (reduced and clipped) to the host, and the
  // parameters too when the device's were written since (the first step, a checkpoint load).
  void before_step();
  // After it: the updated parameters back into the device's buffers.
  void after_step();
  // The device's parameters were written (a resume, a rollback): read them again next step.
  void parameters_written() { stale_ = true; }
  // The host memory the copies take (the optimizer's own state comes on top).
  int64_t host_bytes() const;

 private:
  struct Group {
    at::Tensor device_params, device_grads;  // the optimizer view's slices in the flat buffers
    at::Tensor params, grads;                // their host copies, which the optimizer sees
    loom_param_group abi;
  };
  std::vector<std::unique_ptr<Group>> groups_;  // stable addresses for the ABI pointers
  std::vector<const loom_param_group*> group_pointers_;
  loom_param_groups abi_groups_{};
  bool stale_ = true;
};

}  // namespace loom
