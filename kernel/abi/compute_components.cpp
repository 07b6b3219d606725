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
    view.unit = -1;       // a plugin older than ABI 1.5 leaves it
    view.split_dim = -1;  // older than 1.10
    view.split_blocks = 1;  // older than 1.12
    check(vt_.param_get(handle_, i, &view), "param_get");
    if (view.name == nullptr || view.tensor == nullptr)
      throw runtime_failure(where() + ": parameter " + std::to_string(i) + " has no name or tensor");
    const at::Tensor& t = tensor(view.tensor);
    // A layer another pipeline stage runs is checked against the shape it had here.
    const auto given_back = elsewhere_.find(view.name);
    const std::vector<int64_t> shape =
        given_back != elsewhere_.end() ? given_back->second : (t.defined() ? t.sizes().vec() : std::vector<int64_t>{});
    const auto dims = static_cast<int32_t>(shape.size());
    const bool known = t.defined() || given_back != elsewhere_.end();
    if (view.split_dim < -1 || (known && view.split_dim >= dims))
      throw runtime_failure(where() + ": parameter " + view.name + " says it is split along dimension " +
                            std::to_string(view.split_dim) + " of a tensor with " + std::to_string(dims));
    if (view.split_blocks < 1 ||
        (known && view.split_dim >= 0 && shape[static_cast<size_t>(view.split_dim)] % view.split_blocks != 0))
      throw runtime_failure(where() + ": parameter " + view.name + " says its split dimension holds " +
                            std::to_string(view.split_blocks) + " blocks, which do not divide it");
    out.push_back({view.name, &tensor(view.tensor), view.flags, view.unit, frozen_.count(view.name) > 0,
                   {view.split_dim, view.split_dim >= 0 ? view.split_blocks : 1}, given_back != elsewhere_.end()});
  }
  return out;
}

void ModelInstance::give_to_other_stages(const std::set<std::string>& names) {
  for (const ModelParam& param : params()) {
    if (!names.count(param.name) || param.elsewhere) continue;
    elsewhere_[param.name] = param.tensor->sizes().vec();
    // Stage forwards never reach these layers; a call that did would fail on the empty shape.
    param.tensor->set_data(at::empty({0}, param.tensor->options()));
  }
}

std::vector<int64_t> ModelInstance::whole_shape(const ModelParam& param) const {
  const auto it = elsewhere_.find(param.name);
  return it != elsewhere_.end() ? it->second : param.tensor->sizes().vec();
}

namespace {

// The batch's fields as the ABI lends them: an array of pointers to views, borrowed for a call.
struct FieldViews {
  std::vector<loom_batch_field> views;
  std::vector<const loom_batch_field*> pointers;
  explicit FieldViews(const BatchFields& fields) : views(fields.size()), pointers(fields.size()) {
    for (size_t i = 0; i < fields.size(); ++i) {
      views[i].struct_size = sizeof(loom_batch_field);
      views[i].name = fields[i].first.c_str();
      views[i].tensor = handle(fields[i].second);
      pointers[i] = &views[i];
    }
  }
};

// report_metric (ABI 1.2): runs inside the model's frames, so failures become statuses.
loom_status* report_metric(void* user, const char* name_in, const loom_torch_tensor* value,
                           loom_metric_reduction reduction) {
  auto* metrics = static_cast<std::vector<ReportedMetric>*>(user);
  return status_from(LOOM_STATUS_CODE_INTERNAL, "report_metric", [&]() -> loom_status* {
    const std::string name = name_in ? name_in : "";
    std::string wrong;
    if (!is_lower_snake_case(name)) wrong = "is not a lower_snake_case name";
    else if (reduction < LOOM_METRIC_REDUCTION_SUM || reduction > LOOM_METRIC_REDUCTION_ROC_AUC) wrong = "has an unknown reduction";
    else if (value == nullptr || !tensor(value).defined()) wrong = "has no tensor";
    else if (reduction == LOOM_METRIC_REDUCTION_ROC_AUC) {
      if (tensor(value).dim() != 2 || tensor(value).size(1) != 2 || !at::isFloatingType(tensor(value).scalar_type()))
        wrong = "is reduced as a ROC AUC but is not a float [N, 2] tensor of (score, label) rows";
    } else if (tensor(value).numel() != 1) {
      wrong = "is not a one-element tensor";
    }
    if (!wrong.empty())
      return host_api()->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, ("metric \"" + name + "\" " + wrong).c_str());
    const at::Tensor kept = tensor(value).detach().to(at::kDouble);
    metrics->push_back({name, reduction == LOOM_METRIC_REDUCTION_ROC_AUC ? kept.clone() : kept.reshape({}), reduction});
    return nullptr;
  });
}

}  // namespace

ForwardResult ModelInstance::forward(const at::Tensor& inputs, const at::Tensor& targets, const BatchFields& fields,
                                     const std::string& batch_from) {
  return forward_layers(inputs, targets, fields, LayerRange{}, batch_from);
}

ForwardResult ModelInstance::forward_layers(const at::Tensor& inputs, const at::Tensor& targets,
                                            const BatchFields& fields, const LayerRange& range,
                                            const std::string& batch_from) {
  ForwardResult out;
  const FieldViews views(fields);
  loom_model_forward_args args{};
  args.struct_size = sizeof(args);
  args.inputs = handle(inputs);
  args.targets = handle(targets);
  args.loss_sum = handle(out.loss_sum);
  args.fields = views.pointers.data();
  args.field_count = views.pointers.size();
  args.units = handle(out.units);
  args.metrics = &out.metrics;
  args.report_metric = &report_metric;
  args.layer_begin = range.begin;
  args.layer_end = range.end;
  args.hidden_in = handle(range.hidden_in);
  args.hidden_out = handle(out.hidden_out);
  if (loom_status* status = vt_.forward(handle_, &args)) {
    if (fields.empty() || batch_from.empty()) check(status, "forward");
    throw runtime_failure(where() + ": forward failed: " + take_status_message(status) + " (the batch came from " +
                          batch_from + ")");
  }
  if (range.end >= 0 && !out.loss_sum.defined()) {  // a stage before the last
    if (!out.hidden_out.defined())
      throw runtime_failure(where() + ": forward of layers " + std::to_string(range.begin) + " .. " +
                            std::to_string(range.end - 1) + " must assign hidden_out");
    return out;
  }
  if (!out.loss_sum.defined() || out.loss_sum.numel() != 1)
    throw runtime_failure(where() + ": forward must assign a scalar loss sum");
  out.loss_sum = out.loss_sum.reshape({});
  if (out.units.defined()) {
    if (out.units.numel() != 1) throw runtime_failure(where() + ": forward's units must be one number");
    out.units = out.units.detach().reshape({}).to(at::kDouble);
  }
  return out;
}

void ModelInstance::set_training(bool training) {
  if (vt_.set_training != nullptr) check(vt_.set_training(handle_, training ? 1 : 0), "set_training");
}

double ModelInstance::flops_per_token() const {
  return vt_.flops_per_token != nullptr ? vt_.flops_per_token(handle_) : 0.0;
}

ModelInstance::Attributes ModelInstance::attributes() const {
  Attributes out;
  if (vt_.attributes != nullptr) {
    loom_model_attributes raw{};
    raw.struct_size = sizeof(raw);
    check(vt_.attributes(handle_, &raw), "attributes");
    out.sequence_parallel = raw.sequence_parallel != 0;
    out.expert_parallel = raw.expert_parallel != 0;
    out.context_parallel = raw.context_parallel != 0;  // 0 from a plugin built before 1.16
    out.pipeline_layers = raw.pipeline_layers;          // 0 from a plugin built before 1.17
    return out;
  }
  // A plugin built for ABI 1.11 to 1.14: one callback per capability.
  out.sequence_parallel = vt_.sequence_parallel != nullptr && vt_.sequence_parallel(handle_) != 0;
  out.expert_parallel = vt_.expert_parallel != nullptr && vt_.expert_parallel(handle_) != 0;
  return out;
}

at::Tensor ModelInstance::logits(const at::Tensor& inputs, const BatchFields& fields) {
  if (vt_.logits == nullptr) throw runtime_failure(where() + ": the model does not compute logits on their own");
  const FieldViews views(fields);
  at::Tensor out;
  loom_model_logits_args args{};
  args.struct_size = sizeof(args);
  args.inputs = handle(inputs);
  args.fields = views.pointers.data();
  args.field_count = views.pointers.size();
  args.logits = handle(out);
  check(vt_.logits(handle_, &args), "logits");
  if (!out.defined() || out.dim() != 3 || out.size(0) != inputs.size(0) || out.size(1) != inputs.size(1))
    throw runtime_failure(where() + ": logits must assign a (B, T, V) tensor for (B, T) inputs");
  return out;
}

at::Tensor ModelInstance::decode(const at::Tensor& inputs, int64_t past) {
  if (vt_.decode == nullptr) throw runtime_failure(where() + ": the model keeps no key/value cache (no decode callback)");
  at::Tensor out;
  loom_model_decode_args args{};
  args.struct_size = sizeof(args);
  args.inputs = handle(inputs);
  args.past = past;
  args.logits = handle(out);
  check(vt_.decode(handle_, &args), "decode");
  if (!out.defined() || out.dim() != 3 || out.size(0) != inputs.size(0) || out.size(1) != inputs.size(1))
    throw runtime_failure(where() + ": decode must assign a (B, T, V) tensor for (B, T) inputs");
  return out;
}

std::string ModelInstance::hugging_face() const {
  if (vt_.hugging_face == nullptr) return "";
  loom_model_hugging_face_args args{};
  args.struct_size = sizeof(args);
  check(vt_.hugging_face(handle_, &args), "hugging_face");
  return args.json != nullptr ? args.json : "";
}

DatasetInstance::DatasetInstance(const SlotConfig& slot, const RunContext& run)
    : Instance(slot, run), source_(where()) {
  create();
}

namespace {

// Where add_field puts a batch's named fields (ABI 1.2).
struct FieldSink {
  BatchFields fields;
  const std::string* who;  // the dataset, for messages (DatasetInstance::source_)
};

// Runs inside the dataset's frames: every failure becomes a status, and the tensor is always
// taken (freed on failure), as loom/dataset.h promises.
loom_status* add_batch_field(void* user, const char* name_in, DLManagedTensor* tensor) {
  auto* sink = static_cast<FieldSink*>(user);
  return status_from(LOOM_STATUS_CODE_INVALID_ARGUMENT, "add_field", [&]() -> loom_status* {
    const std::string name = name_in ? name_in : "";
    std::string wrong;
    if (!is_lower_snake_case(name)) wrong = "is not a lower_snake_case name";
    else if (name == "input_ids" || name == "labels") wrong = "travels as the batch's inputs or targets, not as a field";
    for (const auto& field : sink->fields)
      if (field.first == name) wrong = "was added twice";
    if (tensor == nullptr && wrong.empty()) wrong = "has no tensor";
    if (!wrong.empty()) {
      if (tensor && tensor->deleter) tensor->deleter(tensor);
      return host_api()->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT,
                                       ("batch field \"" + name + "\" " + wrong).c_str());
    }
    sink->fields.emplace_back(name, tensor_from_dlpack(tensor, *sink->who + " field " + name));  // takes it
    return nullptr;
  });
}

}  // namespace

Batch DatasetInstance::next() {
  FieldSink sink{{}, &source_};
  loom_batch raw{};
  raw.struct_size = sizeof(raw);
  raw.fields = &sink;
  raw.add_field = &add_batch_field;
  const auto free_raw = [&] {
    if (raw.inputs) raw.inputs->deleter(raw.inputs);
    if (raw.targets) raw.targets->deleter(raw.targets);
  };
  if (loom_status* status = vt_.next(handle_, &raw)) {
    free_raw();
    check(status, "next");
  }
  Batch batch;
  if (raw.end_of_data) {  // (ABI 1.7) a finite stream has nothing left
    free_raw();
    batch.end_of_data = true;
    if (has_state()) batch.data_state = save_state();
    return batch;
  }
  if (raw.end_of_epoch) {
    free_raw();
    batch.end_of_epoch = true;
    if (has_state()) batch.data_state = save_state();
    return batch;
  }
  if (raw.inputs == nullptr || raw.targets == nullptr) {
    free_raw();
    throw runtime_failure(where() + ": next returned a batch without inputs or targets");
  }
  batch.fields = std::move(sink.fields);
  batch.inputs = tensor_from_dlpack(raw.inputs, where());  // takes ownership
  batch.targets = tensor_from_dlpack(raw.targets, where());
  if (batch.inputs.scalar_type() != at::kLong || batch.targets.scalar_type() != at::kLong ||
      batch.inputs.sizes() != batch.targets.sizes() || batch.inputs.dim() != 2)
    throw runtime_failure(where() + ": batches must be int64 inputs and targets of one (B, T) shape");
  if (pieces_.count > 1) cut(batch);
  batch.tokens = batch.targets.ne(LOOM_IGNORE_INDEX).sum().item<int64_t>();  // CPU tensor: no device sync
  if (has_state()) batch.data_state = save_state();
  return batch;
}

void DatasetInstance::cut(Batch& batch) const {
  const int64_t rows = batch.inputs.size(0), T = batch.inputs.size(1);
  const int64_t chunks = pieces_.balanced ? 2 * pieces_.count : pieces_.count;
  // Written only for a message: this runs for every batch.
  const auto option = [&] { return "[distributed] " + std::string(pieces_.option()) + " = " + std::to_string(pieces_.count); };
  if (T % chunks != 0)
    throw usage_failure(where() + ": rows of " + std::to_string(T) + " positions cannot be cut into " + option() +
                        (pieces_.balanced ? " x 2 equal chunks" : " equal pieces") + "; make seq_len (the data's and "
                        "the model's) a multiple of " + std::to_string(chunks));
  const int64_t chunk = T / chunks;
  const auto mine = [&](const at::Tensor& t) {
    if (!pieces_.balanced) return t.narrow(1, pieces_.rank * chunk, chunk).contiguous();
    return at::cat({t.narrow(1, pieces_.rank * chunk, chunk), t.narrow(1, (chunks - 1 - pieces_.rank) * chunk, chunk)}, 1);
  };
  batch.inputs = mine(batch.inputs);
  batch.targets = mine(batch.targets);
  for (auto& [name, field] : batch.fields) {
    if (field.dim() < 2 || field.size(0) != rows || field.size(1) != T)
      throw usage_failure(where() + ": batch field " + name + " is not shaped (batch, positions, ...) like input_ids, "
                          "so it cannot be cut along the sequence for " + option() + "; use " + pieces_.option() +
                          " = 1 with this dataset");
    field = mine(field);
  }
}

std::string DatasetInstance::save_state() { return save_state_with(vt_.state_save); }

loom_dataset_info_args DatasetInstance::info() const {
  loom_dataset_info_args info{};
  info.struct_size = sizeof(info);
  if (vt_.info != nullptr) check(vt_.info(handle_, &info), "info");  // an older plugin leaves the newer fields 0
  return info;
}

int64_t DatasetInstance::batches_per_epoch() const { return info().batches_per_epoch; }

bool DatasetInstance::resumes_other_world_size() const { return info().resumes_other_world_size == 1; }

std::string saved_world_record(const std::vector<std::string>& states) {
  std::string out(LOOM_SAVED_WORLD_MAGIC, sizeof(LOOM_SAVED_WORLD_MAGIC) - 1);
  const auto append = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  append(states.size(), 4);
  append(0, 4);
  for (const std::string& s : states) {
    append(s.size(), 8);
    out += s;
  }
  return out;
}

void DatasetInstance::load_state(const std::string& state) { load_state_with(vt_.state_load, state); }

OptimizerInstance::OptimizerInstance(const SlotConfig& slot, const RunContext& run, const loom_param_groups& groups)
    : Instance(slot, run) {
  create(&groups);
}

void OptimizerInstance::step(double lr, int64_t step) { step_range(lr, step, 0, 0, 0); }  // no range: whole

void OptimizerInstance::step_range(double lr, int64_t step, size_t group, int64_t begin, int64_t end) {
  loom_optimizer_step_args args{};
  args.struct_size = sizeof(args);
  args.lr = lr;
  args.step = step;
  args.range_group = group;
  args.range_begin = begin;
  args.range_end = end;
  check(vt_.step(handle_, &args), "step");
}

void OptimizerInstance::sparse_step(double lr, int64_t step, const std::vector<SparseGrad>& grads) {
  std::vector<loom_sparse_grad> views(grads.size());
  std::vector<const loom_sparse_grad*> pointers(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    views[i].struct_size = sizeof(loom_sparse_grad);
    views[i].table = grads[i].table;
    views[i].rows = handle(grads[i].rows);
    views[i].values = handle(grads[i].values);
    pointers[i] = &views[i];
  }
  loom_sparse_step_args args{};
  args.struct_size = sizeof(args);
  args.lr = lr;
  args.step = step;
  args.grads = pointers.data();
  args.grad_count = pointers.size();
  check(vt_.sparse_step(handle_, &args), "sparse_step");
}

std::vector<OptimizerInstance::StateTensor> OptimizerInstance::state() {
  std::vector<StateTensor> out;
  const size_t count = vt_.state_count ? vt_.state_count(handle_) : 0;
  for (size_t i = 0; i < count && vt_.state_get; ++i) {
    loom_state_tensor view{};
    view.struct_size = sizeof(view);
    view.elementwise_group = -1;
    check(vt_.state_get(handle_, i, &view), "state_get");
    if (view.name == nullptr || view.tensor == nullptr)
      throw runtime_failure(where() + ": state tensor " + std::to_string(i) + " has no name or tensor");
    out.push_back({view.name, &tensor(view.tensor), view.elementwise_group});
  }
  return out;
}

uint64_t OptimizerInstance::requirements() const { return vt_.requirements; }

// The plan refused an optimizer without a float "lr" (config/plan.cpp check_optimizer_lr).
double OptimizerInstance::base_lr() const { return std::get<double>(config_.values.at("lr")); }

}  // namespace loom
