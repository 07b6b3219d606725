#include "train/flat_params.hpp"

#include <loom/torch.hpp>

#include <map>

#include "base/failure.hpp"

namespace loom {

FlatParams::FlatParams(const std::vector<ModelParam>& params) {
  // Group by (device, dtype), keeping reverse registration order inside each group.
  std::map<std::string, std::vector<const ModelParam*>> by_group;
  std::vector<std::string> order;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const at::Tensor& t = *it->tensor;
    if (!t.defined() || !t.is_floating_point())
      throw runtime_failure("parameter \"" + it->name + "\" must be a defined floating-point tensor");
    const std::string key = t.device().str() + "/" + std::string(c10::toString(t.scalar_type()));
    if (!by_group.count(key)) order.push_back(key);
    by_group[key].push_back(&*it);
  }
  at::NoGradGuard no_grad;
  for (const auto& key : order) {
    auto group = std::make_unique<Group>();
    const auto& members = by_group[key];
    int64_t total = 0;
    for (const ModelParam* p : members) total += p->tensor->numel();
    const at::TensorOptions options = members.front()->tensor->options().requires_grad(false);
    group->params = at::empty({total}, options);
    group->grads = at::zeros({total}, options);
    int64_t offset = 0;
    for (const ModelParam* p : members) {
      at::Tensor& param = *p->tensor;
      const int64_t n = param.numel();
      at::Tensor view = group->params.narrow(0, offset, n).view(param.sizes());
      view.copy_(param.detach());
      param.set_data(view);
      param.mutable_grad() = group->grads.narrow(0, offset, n).view(param.sizes());
      auto segment = std::make_unique<Segment>();
      segment->name = p->name;
      segment->shape = param.sizes().vec();
      loom_param_segment& abi = segment->abi;
      abi = loom_param_segment{};
      abi.struct_size = sizeof(abi);
      abi.name = segment->name.c_str();
      abi.offset = offset;
      abi.numel = n;
      abi.ndim = static_cast<int32_t>(segment->shape.size());
      abi.shape = segment->shape.data();
      abi.flags = p->flags;
      group->segment_pointers.push_back(&segment->abi);
      group->segments.push_back(std::move(segment));
      offset += n;
    }
    group->abi = loom_param_group{};
    group->abi.struct_size = sizeof(loom_param_group);
    group->abi.params = handle(group->params);
    group->abi.grads = handle(group->grads);
    group->abi.segments = group->segment_pointers.data();
    group->abi.segment_count = group->segment_pointers.size();
    group_pointers_.push_back(&group->abi);
    groups_.push_back(std::move(group));
  }
  abi_groups_ = loom_param_groups{};
  abi_groups_.struct_size = sizeof(loom_param_groups);
  abi_groups_.groups = group_pointers_.data();
  abi_groups_.group_count = group_pointers_.size();
}

void FlatParams::zero_grad() {
  for (auto& g : groups_) g->grads.zero_();
}

at::Tensor FlatParams::grad_norm() const {
  if (groups_.size() == 1) return groups_[0]->grads.norm();
  at::Tensor squares;
  for (const auto& g : groups_) {
    at::Tensor s = g->grads.to(at::kFloat).pow(2).sum();
    squares = squares.defined() ? squares + s.to(squares.device()) : s;
  }
  return squares.sqrt();
}

void FlatParams::clip(const at::Tensor& norm, double max_norm) {
  // coefficient = min(1, max_norm / norm), computed on the device: no host sync
  scale_grads((max_norm / (norm + 1e-6)).clamp_max(1.0));
}

void FlatParams::scale_grads(const at::Tensor& factor) {
  for (auto& g : groups_) g->grads.mul_(factor.to(g->grads.device(), g->grads.scalar_type()));
}

std::vector<at::Tensor> FlatParams::param_buffers() const {
  std::vector<at::Tensor> out;
  for (const auto& g : groups_) out.push_back(g->params);
  return out;
}

std::vector<at::Tensor> FlatParams::grad_buckets(int64_t max_bytes) const {
  std::vector<at::Tensor> out;
  for (const auto& g : groups_) {
    const int64_t per_bucket = std::max<int64_t>(1, max_bytes / g->grads.element_size());
    for (int64_t start = 0; start < g->grads.numel(); start += per_bucket)
      out.push_back(g->grads.narrow(0, start, std::min(per_bucket, g->grads.numel() - start)));
  }
  return out;
}

int64_t FlatParams::numel() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g->params.numel();
  return n;
}

}  // namespace loom
