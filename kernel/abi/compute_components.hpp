// compute_components.hpp: host-side owners of the kinds on the training path: the model and
// optimizer (torch-linked, opaque at::Tensor handles) and the dataset (DLPack batches).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "abi/instance.hpp"
#include "formats/tensor_split.hpp"

namespace loom {

// A batch's fields beyond inputs and targets (ABI 1.2), in the order the dataset added them.
using BatchFields = std::vector<std::pair<std::string, at::Tensor>>;

// A scalar the model reported for one micro-batch (ABI 1.2).
struct ReportedMetric {
  std::string name;
  at::Tensor value;  // one element, on the run device: read only on log steps; [N, 2] for ROC AUC
  loom_metric_reduction reduction;
};

// What one forward gives back.
struct ForwardResult {
  at::Tensor loss_sum;                  // scalar: the sum of the per-unit losses
  at::Tensor units;                     // undefined unless the model reported its units
  std::vector<ReportedMetric> metrics;  // in the order reported
  at::Tensor hidden_out;                // (ABI 1.17) a pipeline stage before the last: what it hands on
};

struct ModelParam {
  std::string name;
  at::Tensor* tensor;  // owned by the model; the host rebinds its storage
  uint32_t flags;
  int64_t unit = -1;   // the layer it belongs to (ABI 1.5), or -1
  bool frozen = false; // does not train ([model] freeze, [lora]): outside the flat buffers
  // How it is cut across the tensor-parallel group (ABI 1.10 split_dim, 1.12 split_blocks);
  // split.dim -1: whole on every rank.
  formats::TensorSplit split;
  // One expert of a mixture of experts (ABI 1.13): under expert parallelism only its rank has it.
  bool expert() const { return (flags & LOOM_PARAM_FLAG_EXPERT) != 0; }
  // A layer another pipeline stage holds (ModelInstance::give_to_other_stages): its tensor has
  // no elements on this rank.
  bool elsewhere = false;
};

class ModelInstance : public Instance<loom_model_vtable, loom_model> {
 public:
  ModelInstance(const SlotConfig& slot, const RunContext& run);
  std::vector<ModelParam> params();
  // Marks these parameters frozen in what params() returns, with the checksum of their values
  // (train/frozen_params.hpp): frozen weights never change, so it is computed once.
  void set_frozen(std::set<std::string> names, std::string checksum) {
    frozen_ = std::move(names);
    frozen_checksum_ = std::move(checksum);
  }
  const std::string& frozen_checksum() const { return frozen_checksum_; }  // "" when nothing is frozen
  // Pipeline parallelism: these parameters belong to layers other stages run. Their storage is
  // given back (each becomes a tensor of no elements, of its dtype and device) and params()
  // marks them `elsewhere`; whole_shape() keeps the shape each had.
  void give_to_other_stages(const std::set<std::string>& names);
  std::vector<int64_t> whole_shape(const ModelParam& param) const;
  // One micro-batch's loss sum, units and metrics; fields: the batch's other named fields.
  // batch_from names the dataset ("[data] fields_data") in a failure, when the batch had fields.
  ForwardResult forward(const at::Tensor& inputs, const at::Tensor& targets, const BatchFields& fields = {},
                        const std::string& batch_from = "");
  // (ABI 1.17) Layers begin .. end - 1 of attributes().pipeline_layers (a pipeline stage's), from
  // hidden_in unless begin is 0: hidden_out when end is below the layers, else as forward().
  struct LayerRange {
    int64_t begin = 0, end = -1;
    at::Tensor hidden_in;
  };
  ForwardResult forward_layers(const at::Tensor& inputs, const at::Tensor& targets, const BatchFields& fields,
                               const LayerRange& range, const std::string& batch_from);
  // The loss sum alone.
  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets, const BatchFields& fields = {}) {
    return forward(inputs, targets, fields).loss_sum;
  }
  void set_training(bool training);
  double flops_per_token() const;
  // (ABI 1.3) The next-token logits (B, T, V), no loss; a runtime Failure when the model has
  // no logits callback.
  at::Tensor logits(const at::Tensor& inputs, const BatchFields& fields = {});
  // (ABI 1.4) Generation with the model's key/value cache: the logits (B, T, V) of the tokens at
  // positions past .. past + T - 1 (past = 0 starts afresh); a runtime Failure without decode.
  bool has_decode() const { return vt_.decode != nullptr; }
  at::Tensor decode(const at::Tensor& inputs, int64_t past);
  // What this instance handles (loom_model_attributes, ABI 1.15), or for a plugin built for
  // 1.11 to 1.14 what its sequence_parallel and expert_parallel callbacks say.
  struct Attributes {
    bool sequence_parallel = false;  // takes sequence pieces and attends across whole rows
    bool expert_parallel = false;    // computes its experts over the expert-parallel group
    bool context_parallel = false;   // (1.16) takes two chunks of rows, ring attention over the rest
    int64_t pipeline_layers = 0;     // (1.17) layers it can be cut between into pipeline stages
  };
  Attributes attributes() const;
  bool handles_sequence_parallel() const { return attributes().sequence_parallel; }
  bool handles_expert_parallel() const { return attributes().expert_parallel; }
  bool handles_context_parallel() const { return attributes().context_parallel; }
  // (ABI 1.3) The model's Hugging Face description (loom/model.h), or "" when it has none.
  std::string hugging_face() const;

 private:
  std::set<std::string> frozen_;
  std::string frozen_checksum_;
  std::map<std::string, std::vector<int64_t>> elsewhere_;  // given to other stages: their shapes
};

struct Batch {
  at::Tensor inputs, targets;  // int64 (B, T)
  BatchFields fields;          // the dataset's other named fields (ABI 1.2), any dtype and rank
  bool end_of_epoch = false;   // (ABI 1.2) no tensors: the dataset's epoch ended here
  bool end_of_data = false;    // (ABI 1.7) no tensors: a finite stream has no batch left
  int64_t tokens = 0;          // positions whose target carries loss
  std::string data_state;      // the dataset's position right after this batch (for resume)
};

// Under sequence parallelism ([distributed] sequence_parallel = count) the model of sequence
// rank `rank` takes piece `rank` of count equal pieces of every row. Under context parallelism
// (context_parallel = count, balanced) rows are cut into 2 count equal chunks and the rank
// takes chunks rank and 2 count - 1 - rank, side by side: causal attention's work is then the
// same on every rank.
struct RowPieces {
  int rank = 0, count = 1;
  bool balanced = false;
  const char* option() const { return balanced ? "context_parallel" : "sequence_parallel"; }
};

class DatasetInstance : public Instance<loom_dataset_vtable, loom_dataset> {
 public:
  DatasetInstance(const SlotConfig& slot, const RunContext& run);
  // From now on next() cuts every batch: inputs, targets and each field shaped (B, T, ...)
  // keep their piece of dim 1; a field of any other shape, or rows that count does not
  // divide, fail the batch with the field's name.
  void cut_rows(const RowPieces& pieces) { pieces_ = pieces; }
  // The next batch, carrying the dataset's position after it when the dataset keeps one; or
  // the end of an epoch (Batch::end_of_epoch, no tensors) when a finite dataset says so.
  Batch next();
  bool has_state() const { return vt_.state_save != nullptr && vt_.state_load != nullptr; }
  std::string save_state();
  void load_state(const std::string& state);
  // (ABI 1.2) Batches of one epoch on this rank; 0 when the dataset does not say.
  int64_t batches_per_epoch() const;
  // (ABI 1.20) Whether load_state takes every saved rank's position (LOOM_SAVED_WORLD_MAGIC)
  // when the run resumes at another world size.
  bool resumes_other_world_size() const;

 private:
  void cut(Batch& batch) const;
  loom_dataset_info_args info() const;

  std::string source_;  // where(), made once: add_field's messages need it for every batch
  RowPieces pieces_;
};

// (ABI 1.20) Every saved rank's dataset state in one record, for a dataset that resumes at another
// world size (loom/dataset.h LOOM_SAVED_WORLD_MAGIC).
std::string saved_world_record(const std::vector<std::string>& states);

class OptimizerInstance : public Instance<loom_optimizer_vtable, loom_optimizer> {
 public:
  OptimizerInstance(const SlotConfig& slot, const RunContext& run, const loom_param_groups& groups);
  void step(double lr, int64_t step);
  // (ABI 1.21) Only when updates_pieces(): the step over elements [begin, end) of one group
  // (begin == end, as step passes: every group, whole).
  void step_range(double lr, int64_t step, size_t group, int64_t begin, int64_t end);
  bool updates_pieces() const { return (requirements() & LOOM_OPTIMIZER_ELEMENTWISE) != 0; }
  // (ABI 1.7) For [sparse_optimizer]: the touched rows of each sparse table and their summed
  // gradients (int64 [n] unique ascending rows, [n, dim] values).
  struct SparseGrad {
    size_t table;
    at::Tensor rows, values;
  };
  bool has_sparse_step() const { return vt_.sparse_step != nullptr; }
  void sparse_step(double lr, int64_t step, const std::vector<SparseGrad>& grads);
  struct StateTensor {
    std::string name;
    at::Tensor* tensor;         // owned by the optimizer
    int64_t elementwise_group;  // -1, or the group whose (owned) params it follows element for element
  };
  // Named state tensors for checkpoints.
  std::vector<StateTensor> state();
  // LOOM_OPTIMIZER_* requirement bits (0 for a plugin older than ABI 1.5).
  uint64_t requirements() const;
  // The "lr" option when the optimizer declares one; the schedule scales it.
  double base_lr() const;
};

}  // namespace loom
