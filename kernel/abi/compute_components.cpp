#include "abi/compute_components.hpp"

#include <loom/torch.hpp>

#include "abi/dlpack_tensor.hpp"

namespace loom {

ModelInstance::ModelInstance(const SlotConfig& slot, const RunContext& run) : Instance(slot, run) { create(); }

std::vector<ModelParam> ModelInstance::params() {
  std::vector<ModelParam> out;
  const size_t count = vt_.param_count(handle_);
  for (size_t i = 0; i < count; ++i) {
    loom_param_view view{};
    view.struct_size = sizeof(view);
    check(vt_.param_get(handle_, i, &view), "param_get");
    if (view.name == nullptr || view.tensor == nullptr)
      throw runtime_failure(where() + ": parameter " + std::to_string(i) + " has no name or tensor");
    out.push_back({view.name, &tensor(view.tensor), view.flags});
  }
  return out;
}

at::Tensor ModelInstance::loss_sum(const at::Tensor& inputs, const at::Tensor& targets) {
  at::Tensor loss;
  loom_model_forward_args args{};
  args.struct_size = sizeof(args);
  args.inputs = handle(inputs);
  args.targets = handle(targets);
  args.loss_sum = handle(loss);
  check(vt_.forward(handle_, &args), "forward");
  if (!loss.defined() || loss.numel() != 1)
    throw runtime_failure(where() + ": forward must assign a scalar loss sum");
  return loss.reshape({});
}

void ModelInstance::set_training(bool training) {
  if (vt_.set_training != nullptr) check(vt_.set_training(handle_, training ? 1 : 0), "set_training");
}

double ModelInstance::flops_per_token() const {
  return vt_.flops_per_token != nullptr ? vt_.flops_per_token(handle_) : 0.0;
}

DatasetInstance::DatasetInstance(const SlotConfig& slot, const RunContext& run) : Instance(slot, run) { create(); }

Batch DatasetInstance::next() {
  loom_batch raw{};
  raw.struct_size = sizeof(raw);
  check(vt_.next(handle_, &raw), "next");
  if (raw.inputs == nullptr || raw.targets == nullptr) {
    if (raw.inputs) raw.inputs->deleter(raw.inputs);
    if (raw.targets) raw.targets->deleter(raw.targets);
    throw runtime_failure(where() + ": next returned a batch without inputs or targets");
  }
  Batch batch;
  batch.inputs = tensor_from_dlpack(raw.inputs, where());  // takes ownership
  batch.targets = tensor_from_dlpack(raw.targets, where());
  if (batch.inputs.scalar_type() != at::kLong || batch.targets.scalar_type() != at::kLong ||
      batch.inputs.sizes() != batch.targets.sizes() || batch.inputs.dim() != 2)
    throw runtime_failure(where() + ": batches must be int64 inputs and targets of one (B, T) shape");
  batch.tokens = batch.targets.ne(LOOM_IGNORE_INDEX).sum().item<int64_t>();  // CPU tensor: no device sync
  if (has_state()) batch.data_state = save_state();
  return batch;
}

std::string DatasetInstance::save_state() { return save_state_with(vt_.state_save); }

void DatasetInstance::load_state(const std::string& state) { load_state_with(vt_.state_load, state); }

OptimizerInstance::OptimizerInstance(const SlotConfig& slot, const RunContext& run, const loom_param_groups& groups)
    : Instance(slot, run) {
  create(&groups);
}

void OptimizerInstance::step(double lr, int64_t step) {
  loom_optimizer_step_args args{};
  args.struct_size = sizeof(args);
  args.lr = lr;
  args.step = step;
  check(vt_.step(handle_, &args), "step");
}

std::vector<std::pair<std::string, at::Tensor*>> OptimizerInstance::state() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  const size_t count = vt_.state_count ? vt_.state_count(handle_) : 0;
  for (size_t i = 0; i < count && vt_.state_get; ++i) {
    loom_state_tensor view{};
    view.struct_size = sizeof(view);
    check(vt_.state_get(handle_, i, &view), "state_get");
    if (view.name == nullptr || view.tensor == nullptr)
      throw runtime_failure(where() + ": state tensor " + std::to_string(i) + " has no name or tensor");
    out.emplace_back(view.name, &tensor(view.tensor));
  }
  return out;
}

double OptimizerInstance::base_lr() const {
  auto it = config_.values.find("lr");
  if (it == config_.values.end()) return 1.0;
  if (const double* v = std::get_if<double>(&it->second)) return *v;
  return 1.0;
}

}  // namespace loom
