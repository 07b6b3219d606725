// causal_lm.hpp: what `gpt` and `llama` share as loom::Models: both compute logits with
// forward(inputs, layout) and turn them into loss sums the same way, checking the batch first.
// Header-only, in the plugin-local namespace loom_gpt.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <loom/model.hpp>
#include <loom/sequence_parallel.hpp>
#include <loom/tensor_parallel.hpp>
#include <loom_ops/chunked_loss.hpp>

#include <string>

#include "layers/attention.hpp"
#include "layers/model_common.hpp"
#include "layers/packing.hpp"
#include "layers/ring_attention.hpp"

namespace loom_gpt {

class CausalLm : public loom::Model {
 public:
  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    check(inputs, targets);
    const at::Tensor positions = takes_parts_of_rows() ? piece_positions(inputs, seq_, ring_) : at::Tensor();
    return with_extra(head_loss(hidden(inputs, {positions, mask_}), targets), targets, at::Tensor());
  }

  // Packed rows: position_ids and document_ids when the dataset gives them (packing.hpp).
  at::Tensor loss_sum(const loom::BatchFields& batch) override {
    check(batch.input_ids, batch.labels);
    return batch_loss(batch, hidden(batch.input_ids, layout(batch)));
  }

  // Pipeline parallelism (ABI 1.17): the layers begin .. end - 1 of this micro-batch; the first
  // stage embeds, the last normalises and ends with the loss, as loss_sum does in one call.
  int64_t pipeline_layers() const override { return layer_count(); }
  at::Tensor stage_forward(const loom::BatchFields& batch, int64_t begin, int64_t end, const at::Tensor& x) override {
    check(batch.input_ids, batch.labels);
    const Layout rows = layout(batch);
    const at::Tensor out = run_layers(begin == 0 ? embed(batch.input_ids, rows) : x, rows, begin, end);
    return end < layer_count() ? out : batch_loss(batch, final_norm(out));
  }

  at::Tensor logits(const loom::BatchFields& batch) override {
    refuse_pieces("logits");
    check_batch(component_.c_str(), batch.input_ids, batch.input_ids, seq_len_, vocab_size_);
    return forward(batch.input_ids, layout(batch));
  }

  // Generation (ABI 1.4): the new positions past .. past + T - 1 attend to the cached keys and
  // values of the positions before them; the layers append their own.
  at::Tensor decode(const at::Tensor& inputs, int64_t past) override {
    refuse_pieces("decode");
    if (past == 0) cache_ = KvCache(seq_len_);
    if (past != cache_.length)
      throw loom::Error(component_ + ": decode was given past = " + std::to_string(past) + " but holds " +
                        std::to_string(cache_.length) + " positions; start a sequence with past = 0");
    if (inputs.dim() != 2 || inputs.size(1) < 1 || past + inputs.size(1) > seq_len_)
      throw loom::Error(component_ + ": decode takes (B, T) inputs with past + T at most seq_len = " + std::to_string(seq_len_) +
                        "; start again from past = 0 with the newest tokens");
    check_batch(component_.c_str(), inputs, inputs, seq_len_, vocab_size_);
    at::NoGradGuard no_grad;
    const int64_t B = inputs.size(0), T = inputs.size(1);
    Layout layout{at::arange(past, past + T, inputs.options()).expand({B, T}), mask_, &cache_};
    try {
      at::Tensor logits = forward(inputs, layout);
      cache_.advance(T);
      return logits;
    } catch (...) {
      cache_ = KvCache(seq_len_);  // some layers may have appended: the cache no longer matches any past
      throw;
    }
  }

  bool sequence_parallel() const override { return seq_.split(); }
  bool context_parallel() const override { return ring_.split(); }

  // Parameters of the whole model that other ranks hold (experts placed on other ranks of the
  // expert-parallel group): a folder's tensors of these names are theirs to load.
  const std::vector<std::string>& held_elsewhere() const { return held_elsewhere_; }

 protected:
  std::vector<std::string> held_elsewhere_;  // see held_elsewhere()
  // A model whose attention exchanges heads over the sequence group (loom/sequence_parallel.hpp)
  // calls this: its loss_sum then takes pieces of rows. heads: the query heads this rank holds
  // (after any tensor-parallel split), which S must divide; dropout would draw the same masks on
  // every rank's piece, so it is refused. Throws loom::Error naming the component.
  void set_sequence_parallel(const loom::sequence_parallel::Group& group, const std::string& component, int64_t heads,
                             double dropout) {
    if (!group.split()) return;
    require(heads % group.size == 0, component + ": the query heads (n_head) = " + std::to_string(heads) +
                                         (tp_.split() ? " on each tensor-parallel rank" : "") +
                                         " is not a multiple of [distributed] sequence_parallel = " +
                                         std::to_string(group.size) + "; choose a sequence_parallel that divides it");
    require(dropout == 0.0, component + ": dropout = " + std::to_string(dropout) +
                                " with [distributed] sequence_parallel > 1 would draw the same masks on every rank's "
                                "piece; set dropout = 0 (sequence-parallel dropout is not built yet)");
    seq_ = group;
  }
  // A model whose attention goes through whole_row_attention() calls this: under context
  // parallelism its loss_sum takes two chunks of each row (loom/context_parallel.hpp). dropout is
  // refused as for sequence parallelism. Throws loom::Error naming the component.
  void set_context_parallel(const loom::context_parallel::Group& group, const std::string& component, double dropout) {
    if (!group.split()) return;
    require(dropout == 0.0, component + ": dropout = " + std::to_string(dropout) +
                                " with [distributed] context_parallel > 1 would draw the same masks on every rank's "
                                "chunks; set dropout = 0 (context-parallel dropout is not built yet)");
    ring_ = group;
  }
  // Causal attention of this rank's positions over whole rows: as they are in one process; over
  // the sequence group, for 1/S of the heads after an all-to-all (key/value heads that S does not
  // divide repeated for their queries first, as DeepSpeed-Ulysses does, so every rank receives
  // the ones its queries read); or over the context group's ring (ring_attention.hpp).
  // q: (B, H, T, D); k, v: (B, K, S, D); returns (B, H, T, D).
  at::Tensor whole_row_attention(const at::Tensor& q, at::Tensor k, at::Tensor v, const Layout& layout,
                                 double dropout, bool training, int64_t window = 0) const {
    if (ring_.split()) return ring_attention(q, k, v, ring_, layout.documents, window);
    namespace sp = loom::sequence_parallel;
    const int64_t H = q.size(1), K = k.size(1);
    if (seq_.split() && K % seq_.size != 0) {
      k = k.repeat_interleave(H / K, 1);  // (B, H, S, D): query head h reads key/value head h / (H/K)
      v = v.repeat_interleave(H / K, 1);
    }
    const at::Tensor whole = causal_attention(sp::whole_rows(q, seq_), sp::whole_rows(k, seq_), sp::whole_rows(v, seq_),
                                              layout.mask, dropout, training, window);
    return sp::pieces_of_rows(whole, seq_);
  }
  // Whether this rank holds part of each row (sequence or context parallelism).
  bool takes_parts_of_rows() const { return seq_.split() || ring_.split(); }
  // Under tensor parallelism the output layer holds V/T of the vocabulary (head_weight() is
  // that piece): the loss is computed without gathering the logits, and logits are gathered.
  void set_tensor_parallel(const loom::tensor_parallel::Group& group) { tp_ = group; }
  // component: for messages; mask: the (T, T) causal bias of seq_len positions, or undefined
  // (attention makes what each call needs).
  void set_shape(std::string component, int64_t seq_len, int64_t vocab_size, at::Tensor mask) {
    component_ = std::move(component);
    seq_len_ = seq_len;
    vocab_size_ = vocab_size;
    mask_ = std::move(mask);
  }
  // Loss terms beyond the tokens' (a mixture of experts' load-balancing loss), called after
  // hidden() ran for the batch: the sum to add to the token loss sum, whose units are the
  // labelled tokens of `targets`, or undefined. mask: the batch's attention_mask, or undefined.
  virtual at::Tensor extra_loss_sum(const at::Tensor& targets, const at::Tensor& mask) {
    (void)targets;
    (void)mask;
    return {};
  }
  // inputs: (B, T) -> the last layer's normalised output (B, T, C), before the output layer.
  virtual at::Tensor hidden(const at::Tensor& inputs, const Layout& layout) const {
    return final_norm(run_layers(embed(inputs, layout), layout, 0, layer_count()));
  }
  // hidden() in the three parts a pipeline cuts it into. embed: inputs (B, T) -> what enters
  // layer 0 (B, T, C); run_layers: what enters layer begin -> what leaves layer end - 1;
  // final_norm: what leaves the last layer -> hidden()'s value.
  virtual int64_t layer_count() const = 0;
  virtual at::Tensor embed(const at::Tensor& inputs, const Layout& layout) const = 0;
  virtual at::Tensor run_layers(at::Tensor x, const Layout& layout, int64_t begin, int64_t end) const = 0;
  virtual at::Tensor final_norm(const at::Tensor& x) const = 0;
  // The output layer: (..., C) -> logits (..., V), a product with head_weight() and nothing else.
  virtual at::Tensor head(const at::Tensor& x) const = 0;
  virtual const at::Tensor& head_weight() const = 0;  // (V, C)
  // inputs: (B, T) -> logits (B, T, V).
  at::Tensor forward(const at::Tensor& inputs, const Layout& layout) const {
    const at::Tensor h = hidden(inputs, layout);
    if (!tp_.split()) return head(h);
    return loom::tensor_parallel::gather_last_dim(head(loom::tensor_parallel::enter(h, tp_)), tp_);
  }

 private:
  Layout layout(const loom::BatchFields& batch) const {
    return layout_of(batch, mask_, seq_len_, component_.c_str(), seq_, ring_);
  }

  // The batch's loss sum from h, the last layer's normalised output (B, T, C). With an
  // attention_mask (packed or padded rows) it reports how full the rows are: the fraction of
  // positions that hold a token and the fraction that carry a label.
  at::Tensor batch_loss(const loom::BatchFields& batch, const at::Tensor& h) {
    const at::Tensor* mask = batch.find("attention_mask");
    if (!mask) return with_extra(head_loss(h, batch.labels), batch.labels, at::Tensor());
    report("nonpad_fraction", mask->ne(0).to(at::kFloat).mean());
    report("label_fraction", batch.labels.ne(LOOM_IGNORE_INDEX).to(at::kFloat).mean());
    // Instruction rows label only the answers, and over a large vocabulary the output layer is
    // most of the step (Qwen3's 151669 tokens at width 64: 99% of the FLOPs), so only labelled
    // positions go through it. Selecting them costs a host sync on a GPU, hence only for
    // batches that say they are such rows (attention_mask).
    const at::Tensor labelled = batch.labels.ne(LOOM_IGNORE_INDEX);  // (B, T) bool
    return with_extra(head_loss(h.index({labelled}), batch.labels.index({labelled})), batch.labels, *mask);
  }

  at::Tensor with_extra(const at::Tensor& token_loss_sum, const at::Tensor& targets, const at::Tensor& mask) {
    const at::Tensor extra = extra_loss_sum(targets, mask);
    return extra.defined() ? token_loss_sum + extra : token_loss_sum;
  }

  // Logits and generation see whole rows, in one process: no pieces.
  void refuse_pieces(const char* call) const {
    if (takes_parts_of_rows())
      throw loom::Error(component_ + ": " + call + " under [distributed] " +
                        (ring_.split() ? "context_parallel" : "sequence_parallel") + " > 1 is not supported; run it "
                        "in one process");
  }

  // The output layer and the token loss sum: hidden (..., C), targets (...). Logits that fit in
  // one chunk go the plain way; larger ones through chunked_loss.hpp, never whole, in the
  // dtype autocast would give the product.
  at::Tensor head_loss(const at::Tensor& hidden, const at::Tensor& targets) const {
    const at::Tensor rows = hidden.reshape({-1, hidden.size(-1)});  // (N, C)
    if (tp_.split())  // (N, V/T) logits per rank: the pieces are a chunk of their own
      return loom::tensor_parallel::cross_entropy_sum(head(loom::tensor_parallel::enter(rows, tp_)),
                                                      targets.reshape({-1}), tp_);
    const at::DeviceType device = rows.device().type();
    const int64_t chunk = loom_ops::loss_chunk_rows(vocab_size_, device);
    if (rows.size(0) <= chunk) return loom::token_loss_sum(head(rows), targets.reshape({-1}));
    const at::ScalarType dtype =
        at::autocast::is_autocast_enabled(device) ? at::autocast::get_autocast_dtype(device) : rows.scalar_type();
    return loom_ops::chunked_linear_cross_entropy(rows.to(dtype), head_weight().to(dtype), targets.reshape({-1}),
                                        LOOM_IGNORE_INDEX, chunk);
  }

  // Training batches: on a GPU the ids are scanned once (a host sync), not every step. Under
  // sequence or context parallelism the whole row is the parts together.
  void check(const at::Tensor& inputs, const at::Tensor& targets) {
    const int64_t parts = seq_.size * ring_.size;  // one of them is 1
    if (parts > 1 && inputs.dim() == 2 && inputs.size(1) * parts > seq_len_)
      throw loom::Error(component_ + ": rows of " + std::to_string(inputs.size(1) * parts) + " positions (" +
                        (ring_.split() ? "context_parallel chunks" : "sequence_parallel pieces") + " of " +
                        std::to_string(inputs.size(1)) + ") are longer than seq_len = " + std::to_string(seq_len_) +
                        "; raise model.seq_len");
    check_batch(component_.c_str(), inputs, targets, seq_len_, vocab_size_, !device_ids_scanned_);
    device_ids_scanned_ |= !inputs.is_cpu();
  }

  std::string component_;
  int64_t seq_len_ = 0, vocab_size_ = 0;
  at::Tensor mask_;  // (T, T) float, -inf above the diagonal; a buffer (or undefined)
  KvCache cache_;    // decode()'s keys and values; empty until generation
  bool device_ids_scanned_ = false;  // a training batch's ids were scanned on the GPU once
  loom::tensor_parallel::Group tp_;  // size 1: the whole vocabulary on this rank
  loom::sequence_parallel::Group seq_;  // size 1: whole rows (or a model that takes no pieces)
  loom::context_parallel::Group ring_;  // size 1: no ring (or a model that takes no chunks)
};

}  // namespace loom_gpt
