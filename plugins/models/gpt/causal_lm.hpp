// causal_lm.hpp: what `gpt` and `llama` share as loom::Models: both compute logits with
// forward(inputs, layout) and turn them into loss sums the same way, checking the batch first.
// Header-only, in the plugin-local namespace loom_gpt.
#pragma once

#include <loom/model.hpp>

#include <string>

#include "common.hpp"
#include "packing.hpp"

namespace loom_gpt {

class CausalLm : public loom::Model {
 public:
  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    check_batch(component_.c_str(), inputs, targets, seq_len_, vocab_size_);
    return loom::token_loss_sum(forward(inputs, {at::Tensor(), mask_}), targets);
  }

  // Packed rows: position_ids and document_ids when the dataset gives them (packing.hpp).
  at::Tensor loss_sum(const loom::BatchFields& batch) override {
    check_batch(component_.c_str(), batch.input_ids, batch.labels, seq_len_, vocab_size_);
    return loom::token_loss_sum(forward(batch.input_ids, layout(batch)), batch.labels);
  }

  at::Tensor logits(const loom::BatchFields& batch) override {
    check_batch(component_.c_str(), batch.input_ids, batch.input_ids, seq_len_, vocab_size_);
    return forward(batch.input_ids, layout(batch));
  }

 protected:
  // component: for messages; mask: the (T, T) causal bias of seq_len positions.
  void set_shape(std::string component, int64_t seq_len, int64_t vocab_size, at::Tensor mask) {
    component_ = std::move(component);
    seq_len_ = seq_len;
    vocab_size_ = vocab_size;
    mask_ = std::move(mask);
  }
  // inputs: (B, T) -> logits (B, T, V).
  virtual at::Tensor forward(const at::Tensor& inputs, const Layout& layout) const = 0;

 private:
  Layout layout(const loom::BatchFields& batch) const { return layout_of(batch, mask_, seq_len_, component_.c_str()); }

  std::string component_;
  int64_t seq_len_ = 0, vocab_size_ = 0;
  at::Tensor mask_;  // (T, T) float, -inf above the diagonal; a buffer
};

}  // namespace loom_gpt
