// loom/model.hpp: derive from loom::Model to write a model component.
//
//   struct Bigram final : loom::Model {
//     static constexpr const char* name = "bigram";
//     static constexpr const char* summary = "Next-token logits from the current token.";
//     at::Tensor table;
//     Bigram(const loom::Config&, const loom::Context& ctx)
//         : table(add_param("table", at::zeros({256, 256}))) {}
//     at::Tensor loss_sum(const at::Tensor& x, const at::Tensor& y) override {
//       return loom::token_loss_sum(table.index({x}), y);
//     }
//   };
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <loom/adapters.hpp>
#include <loom/plugin.hpp>
#include <loom/torch.hpp>

namespace loom {

// Sum of cross-entropy over every position whose target is not LOOM_IGNORE_INDEX.
// logits: (B, T, V); targets: (B, T).
inline at::Tensor token_loss_sum(const at::Tensor& logits, const at::Tensor& targets) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), {},
                                at::Reduction::Sum, LOOM_IGNORE_INDEX);
}

// A micro-batch as named fields on the run device (ABI 1.2; loom/dataset.h lists the names).
struct BatchFields {
  at::Tensor input_ids, labels;                             // int64 (B, T)
  std::vector<std::pair<std::string, at::Tensor>> others;  // what else the dataset added, in order

  // The field called name (input_ids and labels included), or nullptr.
  const at::Tensor* find(const std::string& name) const {
    if (name == "input_ids") return &input_ids;
    if (name == "labels") return &labels;
    for (const auto& [n, t] : others)
      if (n == name) return &t;
    return nullptr;
  }
  // The field, checked: throws loom::Error naming the field, the expected dtype and rank, and
  // what the dataset gave (so a mismatch is one clear line, not a LibTorch error deep inside).
  const at::Tensor& require(const std::string& name, at::ScalarType dtype, int64_t dim) const {
    const at::Tensor* t = find(name);
    if (t == nullptr) throw Error("batch field \"" + name + "\" is missing; the dataset must provide it");
    if (t->scalar_type() != dtype || t->dim() != dim)
      throw Error("batch field \"" + name + "\": expected " + c10::toString(dtype) + " of rank " +
                  std::to_string(dim) + ", got " + c10::toString(t->scalar_type()) + " of rank " +
                  std::to_string(t->dim()));
    return *t;
  }
};

class Model {
 public:
  static constexpr loom_kind kind = LOOM_KIND_MODEL;
  template <class T>
  static const void* vtable();

  virtual ~Model() = default;
  // Sum of per-token losses of one micro-batch. inputs, targets: int64 (B, T).
  virtual at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) = 0;
  // The same, seeing every field of the batch (ABI 1.2). Override it to read fields such as
  // position_ids; the default ignores them and calls loss_sum(input_ids, labels).
  virtual at::Tensor loss_sum(const BatchFields& batch) { return loss_sum(batch.input_ids, batch.labels); }
  virtual void set_training(bool training) { training_ = training; }

  // Inside loss_sum (ABI 1.2): reports a named scalar of this micro-batch (a one-element
  // tensor on the run device; no host sync), combined over micro-batches, ranks and the log
  // window by `reduction`. A host older than 1.2 ignores it.
  void report(const std::string& metric, const at::Tensor& value,
              loom_metric_reduction reduction = LOOM_METRIC_REDUCTION_MEAN) {
    if (forward_ == nullptr || forward_->report_metric == nullptr) return;
    check(forward_->report_metric(forward_->metrics, metric.c_str(), handle(value), reduction));
  }
  // Inside loss_sum (ABI 1.2): the micro-batch's loss-carrying units, when they are not its
  // label tokens (samples, for a per-sample loss); the host normalizes by their sum.
  void set_units(const at::Tensor& units) {
    if (forward_ != nullptr && forward_->units != nullptr) tensor(forward_->units) = units;  // NULL: host < 1.2
  }
  // Forward+backward FLOPs per token, for MFU. A model that does not override it has no
  // flops_per_token callback, and its runs report no MFU.
  virtual double flops_per_token() const { return 0.0; }
  // (ABI 1.3) The next-token logits (B, T, V) of batch.input_ids (labels undefined), no loss.
  // A model that does not override it has no logits callback.
  virtual at::Tensor logits(const BatchFields& batch) {
    (void)batch;
    throw Error("this model does not compute logits on their own");
  }
  // (ABI 1.3) The model as a Hugging Face checkpoint: a JSON object with "config" and
  // optionally "generation_config" and "files_from" (loom/model.h); "" when the model is not
  // a Hugging Face architecture. A model that does not override it has no callback.
  virtual std::string hugging_face() const { return ""; }
  // (ABI 1.4) Generation with a key/value cache: the logits (B, T, V) of `inputs` (B, T), the
  // tokens at positions past .. past + T - 1, given the keys and values the model kept from
  // the calls before (past = 0 starts afresh). A model that does not override it has no decode
  // callback, and `host generate` recomputes the sequence with logits() each step.
  virtual at::Tensor decode(const at::Tensor& inputs, int64_t past) {
    (void)inputs;
    (void)past;
    throw Error("this model keeps no key/value cache");
  }
  // (ABI 1.11; loom_model_attributes since 1.15) Whether this instance handles
  // [distributed] sequence_parallel > 1: loss_sum
  // then gets piece ctx.sequence_parallel_rank of every row and must attend across the whole
  // row through loom/sequence_parallel.hpp. The host refuses sequence parallelism otherwise.
  virtual bool sequence_parallel() const { return false; }
  // (ABI 1.12; loom_model_attributes since 1.15) Whether this instance handles
  // [distributed] expert_parallel > 1: its experts are
  // computed by the ranks of the expert group, tokens exchanged through loom/expert_parallel.hpp.
  // The host refuses expert parallelism otherwise.
  virtual bool expert_parallel() const { return false; }
  // (ABI 1.16) Whether this instance handles [distributed] context_parallel > 1: loss_sum
  // then gets chunks r and 2C-1-r of every row (r = ctx.context_parallel_rank) and must attend
  // across the whole row by passing keys and values around the group (loom/context_parallel.hpp).
  // The host refuses context parallelism otherwise.
  virtual bool context_parallel() const { return false; }
  // (ABI 1.17) Pipeline parallelism: how many layers the model can be cut between, each layer's
  // parameters registered with its unit (add_param inside begin_unit(i)). 0: it cannot be cut,
  // and the host refuses [distributed] pipeline_parallel > 1.
  virtual int64_t pipeline_layers() const { return 0; }
  // (ABI 1.17) Layers begin .. end - 1 of pipeline_layers() for one micro-batch: from
  // batch.input_ids through the embedding when begin is 0, else from `hidden`, what the call for
  // the layers before returned. Returns loss_sum(batch)'s value when end is pipeline_layers()
  // (report() and set_units() work as there), else the hidden state leaving layer end - 1.
  virtual at::Tensor stage_forward(const BatchFields& batch, int64_t begin, int64_t end, const at::Tensor& hidden) {
    (void)batch;
    (void)begin;
    (void)end;
    (void)hidden;
    throw Error("this model does not run ranges of its layers");
  }

 protected:
  // Registers a parameter (in a fixed order) and returns a handle sharing its storage. The
  // host later rebinds the storage into its flat buffer; every handle sees the change.
  at::Tensor add_param(std::string name, at::Tensor init, uint32_t flags = 0) {
    init.requires_grad_(true);
    params_.push_back({std::move(name), init, flags, unit_, -1});
    created(params_.back());
    return init;
  }
  // (ABI 1.19) Writes `value` (the parameter's shape, any dtype) into a parameter this create
  // registered, weights loaded from a file say: the host writes only the part it keeps of the
  // parameter (a rank's slice with shard = "parameters", nothing of another pipeline stage's
  // layer), so loading never brings the whole model back. A host before 1.19: copied whole.
  static void write_param(const std::string& name, const at::Tensor& param, const at::Tensor& value) {
    const loom_host_api& api = host();
    if (!LOOM_STRUCT_HAS(&api, loom_host_api, param_write) || api.param_write == nullptr) {
      at::NoGradGuard no_grad;
      at::Tensor(param).copy_(value);
      return;
    }
    loom_param_write_args args{};
    args.struct_size = sizeof(args);
    args.name = name.c_str();
    at::Tensor target = param, source = value;
    args.tensor = handle(target);
    args.value = handle(source);
    check(api.param_write(&args));
  }
  // Expert parallelism (ABI 1.13, LOOM_PARAM_FLAG_EXPERT): registers expert `expert` of
  // `experts` when this rank computes it (ctx.expert_parallel_rank's equal share, in order) and
  // returns it; otherwise registers nothing and returns an undefined tensor. Initialise `init`
  // exactly as without expert parallelism (draw every expert, keep yours), so every layout
  // starts from the same weights.
  at::Tensor add_expert_param(std::string name, at::Tensor init, int64_t expert, int64_t experts, const Context& ctx,
                              uint32_t flags = 0) {
    const int64_t ranks = ctx.expert_parallel_size, per_rank = experts / ranks;
    if (ranks > 1 && host().abi_minor < 13)
      throw Error(name + ": this host (older than Loom ABI 1.13) cannot place experts on their ranks; use a newer "
                  "host or [distributed] expert_parallel = 1");
    if (experts % ranks != 0)
      throw Error(name + ": [distributed] expert_parallel = " + std::to_string(ranks) + " does not divide the " +
                  std::to_string(experts) + " experts; choose a divisor of them");
    if (expert / per_rank != ctx.expert_parallel_rank) return at::Tensor();
    return add_param(std::move(name), std::move(init), flags | LOOM_PARAM_FLAG_EXPERT);
  }
  // Tensor parallelism (ABI 1.10, loom/tensor_parallel.hpp): registers this rank's piece of
  // `whole`, cut into ctx.tensor_parallel_size equal pieces along `dim` (piece
  // ctx.tensor_parallel_rank), and returns it. Initialise `whole` exactly as without tensor
  // parallelism, so every layout starts from the same weights. Without it, add_param(whole).
  // blocks (ABI 1.12): along `dim` the whole is that many equal blocks side by side (a fused
  // q/k/v: 3), each cut alike; the piece is this rank's cut of every block, in block order.
  at::Tensor add_split_param(std::string name, const at::Tensor& whole, int64_t dim, const Context& ctx,
                             uint32_t flags = 0, int64_t blocks = 1) {
    if (ctx.tensor_parallel_size <= 1) return add_param(std::move(name), whole, flags);
    const int64_t size = ctx.tensor_parallel_size;
    if (dim < 0 || dim >= whole.dim() || blocks < 1 || whole.size(dim) % (blocks * size) != 0)
      throw Error(name + ": cannot be split into " + std::to_string(size) + " equal pieces along dimension " +
                  std::to_string(dim) + (blocks > 1 ? " in each of its " + std::to_string(blocks) + " blocks" : "") +
                  "; choose a [distributed] tensor_parallel that divides it");
    const int64_t n = whole.size(dim) / (blocks * size);
    // dim -> (blocks, size, n): this rank's n of every block.
    at::Tensor mine =
        whole.unflatten(dim, {blocks, size, n}).select(dim + 1, ctx.tensor_parallel_rank).flatten(dim, dim + 1).clone();
    mine.requires_grad_(true);
    params_.push_back({std::move(name), mine, flags, unit_, dim, blocks});
    created(params_.back());
    return mine;
  }
  // A [lora] adapter's initial A (rank, in), uniform in +-1/sqrt(in), and B (out, rank), zero,
  // whole; A's draw depends on the run seed and the module's name alone.
  static std::pair<at::Tensor, at::Tensor> adapter_init(const std::string& module, int64_t in, int64_t out_features,
                                                        const at::TensorOptions& weight_options, const Context& ctx) {
    const int64_t rank = ctx.adapters.rank;
    uint64_t seed = ctx.seed ^ 0x9e3779b97f4a7c15ull;  // FNV-1a over the name, mixed into the run seed
    for (unsigned char c : module) seed = (seed ^ c) * 0x100000001b3ull;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    const at::TensorOptions options = weight_options.requires_grad(false);
    at::Tensor a = at::empty({rank, in}, options.device(at::kCPU)).uniform_(-bound, bound, gen).to(options.device());
    return {a, at::zeros({out_features, rank}, options)};
  }
  // A linear layer's weight, registered as "<module>.weight" (flags as add_param's). When the
  // manifest's [lora] targets the module (ctx.adapters, ABI 1.8), its adapter is registered
  // right after it: "<module>.lora_A.weight" (rank, in), uniform in +-1/sqrt(in) as nn.Linear's
  // and PEFT's default (kaiming_uniform with a = sqrt(5)), and "<module>.lora_B.weight"
  // (out, rank), zero; both flagged LOOM_PARAM_FLAG_ADAPTER. A's draw depends on the run seed and
  // the module's name alone, so the base's initialisation and the other adapters are unchanged.
  // Compute the layer with the returned AdaptedLinear (operator(), or adapt() after your own
  // matmul).
  AdaptedLinear add_linear(const std::string& module, at::Tensor weight, uint32_t flags, const Context& ctx,
                           WeightLayout layout = WeightLayout::out_in) {
    AdaptedLinear out;
    out.layout = layout;
    const bool in_out = layout == WeightLayout::in_out;
    out.weight = add_param(module + ".weight", std::move(weight), flags | (in_out ? LOOM_PARAM_FLAG_IN_OUT : 0u));
    if (!ctx.adapters.targets_module(module)) return out;
    if (out.weight.dim() != 2) throw Error("add_linear: " + module + ".weight is not a matrix");
    const int64_t in = out.weight.size(in_out ? 0 : 1), out_features = out.weight.size(in_out ? 1 : 0);
    const auto [a, b] = adapter_init(module, in, out_features, out.weight.options(), ctx);
    out.lora_a = add_param(module + ".lora_A.weight", a, LOOM_PARAM_FLAG_ADAPTER);
    out.lora_b = add_param(module + ".lora_B.weight", b, LOOM_PARAM_FLAG_ADAPTER);
    out.scale = ctx.adapters.scale();
    out.dropout = ctx.adapters.dropout;
    return out;
  }
  // A linear layer cut over the tensor-parallel group along `dim` of its weight as stored
  // (add_split_param's rules, blocks included): the output dimension (0 in nn.Linear's layout, 1
  // in Conv1D's in_out) makes it column-parallel, the input one row-parallel. Without tensor
  // parallelism it is add_linear(module, whole, 0, ctx, layout). With it, a [lora] adapter
  // follows the split: B's rows (in the same blocks) with a column-parallel W, A's columns with
  // a row-parallel one, drawn whole as add_linear draws them; the other stays whole
  // (AdaptedLinear sums its gradient over the group). Adapter dropout is refused there: every
  // rank would draw the same mask for its own piece.
  AdaptedLinear add_split_linear(const std::string& module, const at::Tensor& whole, int64_t dim, const Context& ctx,
                                 WeightLayout layout = WeightLayout::out_in, int64_t blocks = 1) {
    if (ctx.tensor_parallel_size <= 1) return add_linear(module, whole, 0, ctx, layout);
    const bool in_out = layout == WeightLayout::in_out;
    const int64_t out_dim = in_out ? 1 : 0;
    AdaptedLinear out;
    out.layout = layout;
    out.weight = add_split_param(module + ".weight", whole, dim, ctx, in_out ? LOOM_PARAM_FLAG_IN_OUT : 0u, blocks);
    if (!ctx.adapters.targets_module(module)) return out;
    if (ctx.adapters.dropout > 0.0)
      throw Error("[lora] dropout = " + std::to_string(ctx.adapters.dropout) + " on " + module +
                  " with [distributed] tensor_parallel > 1 would draw the same mask on every rank's piece; set "
                  "[lora] dropout = 0", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    const bool column = dim == out_dim;
    const auto [a, b] = adapter_init(module, whole.size(1 - out_dim), whole.size(out_dim), whole.options(), ctx);
    const uint32_t flag = LOOM_PARAM_FLAG_ADAPTER;
    out.lora_a = column ? add_param(module + ".lora_A.weight", a, flag)
                        : add_split_param(module + ".lora_A.weight", a, 1, ctx, flag);
    out.lora_b = column ? add_split_param(module + ".lora_B.weight", b, 0, ctx, flag, blocks)
                        : add_param(module + ".lora_B.weight", b, flag);
    out.scale = ctx.adapters.scale();
    out.split_dim = column ? 0 : 1;
    out.group = tensor_parallel::Group(ctx);
    return out;
  }
  // Units (ABI 1.5): the parameters added after begin_unit(k) belong to unit k (a layer),
  // until end_unit(). Units are numbered 0, 1, ... in the order forward runs them. Declare
  // them, and call enter_unit / exit_unit around each unit's forward, and the model trains
  // with [distributed] shard = "parameters": the host keeps 1/N of each unit's weights and
  // gathers the rest just before the unit runs (forward and backward).
  void begin_unit(int64_t unit) { unit_ = unit; }
  void end_unit() { unit_ = -1; }
  // x: the unit's input; returns what the unit should compute on.
  at::Tensor enter_unit(int64_t unit, const at::Tensor& x) const { return unit_boundary(unit, LOOM_UNIT_ENTER, x); }
  // y: the unit's output; returns what the model should go on with.
  at::Tensor exit_unit(int64_t unit, const at::Tensor& y) const { return unit_boundary(unit, LOOM_UNIT_EXIT, y); }
  // Takes over the parameters another model registered, in its order: for a component that
  // wraps a model it builds (it then forwards loss_sum and the rest to it).
  void adopt_params(Model& part) {
    for (Param& p : part.params_) params_.push_back(p);  // with its unit and split
    part.params_.clear();
  }
  // For such a wrapper: the part's loss_sum inside this model's host call, so that what the part
  // reports (report(), set_units()) reaches the host as this model's.
  at::Tensor part_loss_sum(Model& part, const BatchFields& batch) {
    return inside_this_call(part, [&] { return part.loss_sum(batch); });
  }
  // The same for a pipeline stage's layers (ABI 1.17).
  at::Tensor part_stage_forward(Model& part, const BatchFields& batch, int64_t begin, int64_t end, const at::Tensor& hidden) {
    return inside_this_call(part, [&] { return part.stage_forward(batch, begin, end, hidden); });
  }
  // The dimension each parameter is split along across the tensor-parallel group (-1: whole),
  // by name, in registration order.
  std::vector<std::pair<std::string, int64_t>> split_dims() const {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const Param& p : params_) out.emplace_back(p.name, p.split_dim);
    return out;
  }
  // The same with the blocks of each split dimension (ABI 1.12; 1 unless add_split_param was
  // given more).
  struct SplitOf {
    std::string name;
    int64_t dim, blocks;
  };
  std::vector<SplitOf> splits() const {
    std::vector<SplitOf> out;
    for (const Param& p : params_) out.push_back({p.name, p.split_dim, p.split_blocks});
    return out;
  }
  // The registered parameters by name, in order (tensors share storage with the model's).
  // without: leave out parameters with any of these flags (LOOM_PARAM_FLAG_ADAPTER: the base
  // weights alone, as a pretrained file holds them).
  std::vector<std::pair<std::string, at::Tensor>> named_params(uint32_t without = 0) const {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const Param& p : params_)
      if (!(p.flags & without)) out.emplace_back(p.name, p.tensor);
    return out;
  }
  bool training_ = true;

 private:
  const loom_model_forward_args* forward_ = nullptr;  // the host's args, during a forward call
  mutable std::string hugging_face_json_;             // what the hugging_face callback lends
  struct Param {
    std::string name;
    at::Tensor tensor;
    uint32_t flags;
    int64_t unit;
    int64_t split_dim;  // add_split_param's dim, or -1
    int64_t split_blocks = 1;
  };
  int64_t unit_ = -1;  // what add_param records: begin_unit's unit, or -1
  // Runs call with part reporting through this model's host call.
  template <class Call>
  at::Tensor inside_this_call(Model& part, Call&& call) {
    part.forward_ = forward_;
    struct Reset {
      Model& part;
      ~Reset() { part.forward_ = nullptr; }
    } reset{part};
    return call();
  }
  // (ABI 1.18) Tells the host a parameter exists, so that a rank that holds only a slice of
  // each (shard = "parameters") can drop the rest of its value now, not after the whole model.
  static void created(Param& p) {
    const loom_host_api& api = host();
    if (!LOOM_STRUCT_HAS(&api, loom_host_api, param_created) || api.param_created == nullptr) return;
    loom_param_created_args args{};
    args.struct_size = sizeof(args);
    args.name = p.name.c_str();
    args.tensor = handle(p.tensor);
    check(api.param_created(&args));
  }
  static at::Tensor unit_boundary(int64_t unit, loom_unit_phase phase, const at::Tensor& x) {
    const loom_host_api& api = host();
    if (!LOOM_STRUCT_HAS(&api, loom_host_api, unit_boundary) || api.unit_boundary == nullptr) return x;
    at::Tensor out;
    loom_unit_boundary_args args{};
    args.struct_size = sizeof(args);
    args.unit = unit;
    args.phase = phase;
    args.input = handle(x);
    args.output = handle(out);
    check(api.unit_boundary(&args));
    return out.defined() ? out : x;
  }
  std::deque<Param> params_;  // deque: addresses stay stable for the handles we lend

  template <class T>
  friend struct ModelGlue;
};

template <class T>
struct ModelGlue {
  static size_t param_count(const loom_model* m) { return detail::self<Model>(m).params_.size(); }
  static loom_status* param_get(loom_model* m, size_t i, loom_param_view* out) {
    return guard([&] {
      auto& p = detail::self<Model>(m).params_.at(i);
      loom_param_view view{};
      view.struct_size = sizeof(view);
      view.name = p.name.c_str();
      view.tensor = handle(p.tensor);
      view.flags = p.flags;
      view.unit = p.unit;
      view.split_dim = p.split_dim;
      view.split_blocks = p.split_blocks;
      // A host older than 1.12 would read a piece of several blocks as one plain piece.
      if (p.split_blocks > 1 && !LOOM_STRUCT_HAS(out, loom_param_view, split_blocks))
        throw Error(p.name + " is split in " + std::to_string(p.split_blocks) + " blocks, which this host (older than "
                    "Loom ABI 1.12) cannot join; use a newer host or [distributed] tensor_parallel = 1");
      write_out(out, view);
    });
  }
  static loom_status* forward(loom_model* m, const loom_model_forward_args* in) {
    return guard([&] {
      const loom_model_forward_args args = read_in(in);
      BatchFields batch{tensor(args.inputs), tensor(args.targets), {}};
      for (size_t i = 0; i < args.field_count && args.fields != nullptr; ++i) {
        const loom_batch_field f = read_in(args.fields[i]);
        batch.others.emplace_back(f.name ? f.name : "", tensor(f.tensor));
      }
      Model& model = detail::self<Model>(m);
      model.forward_ = &args;  // for report() and set_units(), during this call only
      struct Reset {
        Model& model;
        ~Reset() { model.forward_ = nullptr; }
      } reset{model};
      // A host older than 1.17 leaves the layer range 0, 0; a newer one sets 0, -1 for the whole model.
      if (args.layer_begin == 0 && args.layer_end <= 0) {
        tensor(args.loss_sum) = model.loss_sum(batch);
        return;
      }
      const int64_t layers = model.pipeline_layers();
      if (layers <= 0 || args.layer_begin < 0 || args.layer_end <= args.layer_begin || args.layer_end > layers)
        throw Error("layers " + std::to_string(args.layer_begin) + " .. " + std::to_string(args.layer_end - 1) +
                    " asked of a model that runs ranges of its " + std::to_string(layers) + " layers");
      const at::Tensor hidden = args.layer_begin > 0 ? tensor(args.hidden_in) : at::Tensor();
      at::Tensor out = model.stage_forward(batch, args.layer_begin, args.layer_end, hidden);
      tensor(args.layer_end == layers ? args.loss_sum : args.hidden_out) = std::move(out);
    });
  }
  static loom_status* set_training(loom_model* m, int32_t training) {
    return guard([&] { detail::self<Model>(m).set_training(training != 0); });
  }
  static double flops_per_token(const loom_model* m) { return detail::self<Model>(m).flops_per_token(); }
  static loom_status* attributes(const loom_model* m, loom_model_attributes* out) {
    return guard([&] {
      const Model& model = detail::self<Model>(m);
      if (LOOM_STRUCT_HAS(out, loom_model_attributes, sequence_parallel))
        out->sequence_parallel = model.sequence_parallel() ? 1 : 0;
      if (LOOM_STRUCT_HAS(out, loom_model_attributes, context_parallel))
        out->context_parallel = model.context_parallel() ? 1 : 0;
      if (LOOM_STRUCT_HAS(out, loom_model_attributes, expert_parallel))
        out->expert_parallel = model.expert_parallel() ? 1 : 0;
      if (LOOM_STRUCT_HAS(out, loom_model_attributes, pipeline_layers))
        out->pipeline_layers = static_cast<int32_t>(std::min<int64_t>(model.pipeline_layers(), INT32_MAX));
    });
  }
  static loom_status* logits(loom_model* m, const loom_model_logits_args* in) {
    return guard([&] {
      const loom_model_logits_args args = read_in(in);
      BatchFields batch{tensor(args.inputs), at::Tensor(), {}};
      for (size_t i = 0; i < args.field_count && args.fields != nullptr; ++i) {
        const loom_batch_field f = read_in(args.fields[i]);
        batch.others.emplace_back(f.name ? f.name : "", tensor(f.tensor));
      }
      tensor(args.logits) = detail::self<Model>(m).logits(batch);
    });
  }
  static loom_status* decode(loom_model* m, const loom_model_decode_args* in) {
    return guard([&] {
      const loom_model_decode_args args = read_in(in);
      tensor(args.logits) = detail::self<Model>(m).decode(tensor(args.inputs), args.past);
    });
  }
  static loom_status* hugging_face(const loom_model* m, loom_model_hugging_face_args* out) {
    return guard([&] {
      const Model& model = detail::self<Model>(m);
      model.hugging_face_json_ = model.hugging_face();
      if (LOOM_STRUCT_HAS(out, loom_model_hugging_face_args, json))
        out->json = model.hugging_face_json_.empty() ? nullptr : model.hugging_face_json_.c_str();
    });
  }
};

namespace detail {
LOOM_DETAIL_MEMBER_POINTER(flops_per_token)
LOOM_DETAIL_MEMBER_POINTER(logits)
LOOM_DETAIL_MEMBER_POINTER(hugging_face)
LOOM_DETAIL_MEMBER_POINTER(decode)
}  // namespace detail

template <class T>
const void* Model::vtable() {
  static const loom_model_vtable vt = {
      sizeof(loom_model_vtable),
      [](const loom_context* c, const loom_config* cfg, loom_model** out) {
        return detail::create<Model, T>(c, cfg, out);
      },
      &detail::destroy<Model, loom_model>,
      &ModelGlue<T>::param_count,
      &ModelGlue<T>::param_get,
      &ModelGlue<T>::forward,
      &ModelGlue<T>::set_training,  // always: the base's version keeps training_ for the model
      detail::overridden<typename detail::flops_per_token_pointer<T>::type, double (Model::*)() const>
          ? &ModelGlue<T>::flops_per_token
          : nullptr,
      detail::overridden<typename detail::logits_pointer<T>::type, at::Tensor (Model::*)(const BatchFields&)>
          ? &ModelGlue<T>::logits
          : nullptr,
      detail::overridden<typename detail::hugging_face_pointer<T>::type, std::string (Model::*)() const>
          ? &ModelGlue<T>::hugging_face
          : nullptr,
      detail::overridden<typename detail::decode_pointer<T>::type, at::Tensor (Model::*)(const at::Tensor&, int64_t)>
          ? &ModelGlue<T>::decode
          : nullptr,
      nullptr,  // sequence_parallel and expert_parallel: superseded by attributes (ABI 1.15)
      nullptr,
      &ModelGlue<T>::attributes};
  return &vt;
}

}  // namespace loom
