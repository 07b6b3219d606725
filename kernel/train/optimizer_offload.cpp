#include "train/optimizer_offload.hpp"

#include <loom/torch.hpp>

namespace loom {

OptimizerOffload::OptimizerOffload(const FlatParams& flat) {
  const loom_param_groups& view = flat.abi();
  for (size_t i = 0; i < view.group_count; ++i) {
    const loom_param_group& from = *view.groups[i];
    auto g = std::make_unique<Group>();
    g->device_params = tensor(from.params);
    g->device_grads = tensor(from.grads);
    // Pinned on CUDA: the copies run as DMA, and the copy back does not wait for the host.
    const auto host = g->device_params.options().device(at::kCPU).pinned_memory(g->device_params.is_cuda());
    g->params = at::empty_like(g->device_params, host);
    g->grads = at::empty_like(g->device_grads, host);
    g->abi = from;  // the same segment table: offsets are into the slice, which the copy keeps
    g->abi.params = handle(g->params);
    g->abi.grads = handle(g->grads);
    group_pointers_.push_back(&g->abi);
    groups_.push_back(std::move(g));
  }
  abi_groups_ = view;  // sparse tables, if any, stay the device's (none for the dense optimizer)
  abi_groups_.groups = group_pointers_.data();
  abi_groups_.group_count = group_pointers_.size();
}

void OptimizerOffload::before_step() {
  for (auto& g : groups_) {
    if (stale_) g->params.copy_(g->device_params);
    g->grads.copy_(g->device_grads);  // blocking: the update reads them next, on the CPU
  }
  stale_ = false;
}

void OptimizerOffload::after_step() {
  for (auto& g : groups_) g->device_params.copy_(g->params, /*non_blocking=*/true);
}

int64_t OptimizerOffload::host_bytes() const {
  int64_t bytes = 0;
  for (const auto& g : groups_) bytes += static_cast<int64_t>(g->params.nbytes() + g->grads.nbytes());
  return bytes;
}

}  // namespace loom
