#include "train/gradient_writes.hpp"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/failure.hpp"
#include "train/mapped_cuda_memory.hpp"

namespace loom {
namespace {

// Before the accumulator adds: the step's first gradient is copied into the slot and the
// accumulator gets nothing (AccumulateGrad returns at once on an undefined gradient).
struct WriteFirstGradient final : torch::autograd::FunctionPreHook {
  std::shared_ptr<GradientWrites::Slot> slot;
  explicit WriteFirstGradient(std::shared_ptr<GradientWrites::Slot> s) : slot(std::move(s)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    if (slot->written || grads.size() != 1 || !grads[0].defined()) return grads;
    slot->written = true;
    at::NoGradGuard no_grad;
    acquire_mapped(slot->grad);  // CUDA, shard = "parameters": given back after the last step's reduce
    if (grads[0].layout() != at::kStrided) {  // a sparse gradient: zero the slot and let autograd add it
      slot->grad.zero_();
      return grads;
    }
    slot->grad.copy_(grads[0]);
    return {at::Tensor()};
  }
};

// The elements of slot (a contiguous view) that lie inside one of the resident ranges, as a flat
// view; undefined when none do. A slot lies in one buffer, which holds at most one range.
at::Tensor resident_part(const at::Tensor& slot, const std::vector<at::Tensor>& resident) {
  // Addresses: live buffers never overlap, so a range of another buffer finds no elements.
  const auto begin = reinterpret_cast<intptr_t>(slot.data_ptr());
  const int64_t item = slot.element_size();
  for (const at::Tensor& range : resident) {
    if (range.numel() == 0 || range.scalar_type() != slot.scalar_type() || range.device() != slot.device()) continue;
    const auto range_begin = reinterpret_cast<intptr_t>(range.data_ptr());
    const auto range_end = range_begin + static_cast<intptr_t>(range.nbytes());
    const int64_t first = std::max<int64_t>(0, (range_begin - begin) / item);
    const int64_t last = std::min<int64_t>(slot.numel(), (range_end - begin) / item);
    if (first < last) return slot.reshape({-1}).narrow(0, first, last - first);
  }
  return {};
}

}  // namespace

GradientWrites::GradientWrites(const std::vector<ModelParam>& params, const std::vector<at::Tensor>& resident) {
  for (const ModelParam& param : params) {
    const at::Tensor& grad = param.tensor->grad();
    if (!grad.defined() || !grad.is_contiguous())
      throw runtime_failure("parameter \"" + param.name + "\" has no contiguous gradient slot in the flat buffer");
    auto accumulator = torch::autograd::impl::grad_accumulator(*param.tensor);
    if (!accumulator) throw runtime_failure("parameter \"" + param.name + "\" has no gradient accumulator");
    slots_.push_back(std::make_shared<Slot>(Slot{grad, resident_part(grad, resident), false}));
    accumulator->add_pre_hook(std::make_unique<WriteFirstGradient>(slots_.back()));
    accumulators_.push_back(std::make_shared<decltype(accumulator)>(std::move(accumulator)));
  }
}

GradientWrites::~GradientWrites() = default;

void GradientWrites::begin_step() {
  for (auto& slot : slots_) slot->written = false;
}

int64_t GradientWrites::end_passes() {
  at::NoGradGuard no_grad;
  int64_t zeroed = 0;
  for (auto& slot : slots_) {
    if (slot->written) continue;
    if (slot->stale.defined()) slot->stale.zero_();
    slot->written = true;
    ++zeroed;
  }
  return zeroed;
}

std::vector<bool> GradientWrites::written_slots() const {
  std::vector<bool> out;
  out.reserve(slots_.size());
  for (const auto& slot : slots_) out.push_back(slot->written);
  return out;
}

void GradientWrites::set_written(const std::vector<bool>& slots) {
  if (slots.size() != slots_.size())
    throw runtime_failure("gradient slots to set: " + std::to_string(slots.size()) + " for " +
                          std::to_string(slots_.size()) + " parameters");
  for (size_t i = 0; i < slots.size(); ++i) slots_[i]->written = slots[i];
}

}  // namespace loom
