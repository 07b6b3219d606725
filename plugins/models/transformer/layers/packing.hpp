// packing.hpp: packed rows for the `gpt` and `llama` components. A dataset that packs several
// documents into one row gives position_ids (each document's positions restart at 0) and
// document_ids (attention never crosses from one document to another), as ABI 1.2 batch
// fields. Header-only, in the plugin-local namespace loom_gpt.
//
// Shapes: B = batch, T = sequence.
#pragma once

#include <ATen/ATen.h>
#include <loom/context_parallel.hpp>
#include <loom/model.hpp>
#include <loom/sequence_parallel.hpp>

#include <cmath>
#include <string>

#include "layers/attention.hpp"
#include "layers/kv_cache.hpp"

namespace loom_gpt {

// Where each token sits and what it may attend to, for one micro-batch.
struct Layout {
  at::Tensor positions;  // (B, T) int64, or undefined: 0..T-1 on every row
  at::Tensor mask;       // additive attention bias: the model's shared (T_max, T_max) causal
                         // mask (undefined: made where needed, attention.hpp), or (B, T, T)
                         // when documents are packed
  KvCache* cache = nullptr;  // decoding (CausalLm::decode): each layer's keys and values so far
  // Under context parallelism (ring_attention.hpp): the document_ids of whole rows (B, L), or
  // undefined when documents are not packed; the mask is then not read.
  at::Tensor documents;
};

// Under sequence parallelism (loom/sequence_parallel.hpp) the batch holds this rank's piece of
// every row: its positions are the piece's (undefined ones are made), and the mask spans whole
// rows, as attention does once the heads are exchanged. Under context parallelism
// (loom/context_parallel.hpp) it holds two chunks, and the positions are theirs.
inline at::Tensor piece_positions(const at::Tensor& inputs, const loom::sequence_parallel::Group& seq,
                                  const loom::context_parallel::Group& ring = {}) {
  const int64_t B = inputs.size(0), T = inputs.size(1);
  if (ring.split()) return ring.positions(T, inputs.device()).expand({B, T});
  return at::arange(seq.start(T), seq.start(T) + T, inputs.options().dtype(at::kLong)).expand({B, T});
}

// The layout the batch's fields ask for. causal: the model's (T_max, T_max) mask. Throws
// loom::Error naming the component and the field when a field does not fit.
inline Layout layout_of(const loom::BatchFields& batch, const at::Tensor& causal, int64_t seq_len,
                        const char* component, const loom::sequence_parallel::Group& seq = {},
                        const loom::context_parallel::Group& ring = {}) {
  Layout out{seq.split() || ring.split() ? piece_positions(batch.input_ids, seq, ring) : at::Tensor(), causal};
  const auto same_shape = [&](const char* field, const at::Tensor& t) {
    if (t.sizes() != batch.input_ids.sizes())
      throw loom::Error(std::string(component) + ": batch field " + field + " must have the shape of input_ids");
  };
  if (batch.find("position_ids")) {
    out.positions = batch.require("position_ids", at::kLong, 2);
    same_shape("position_ids", out.positions);
    if (out.positions.device().is_cpu() && out.positions.numel() > 0 &&
        (out.positions.min().item<int64_t>() < 0 || out.positions.max().item<int64_t>() >= seq_len))
      throw loom::Error(std::string(component) + ": position_ids must lie in [0, seq_len = " +
                        std::to_string(seq_len) + "); raise model.seq_len or split the documents");
  }
  if (batch.find("document_ids")) {
    const at::Tensor& piece = batch.require("document_ids", at::kLong, 2);
    same_shape("document_ids", piece);
    if (ring.split()) {  // ring attention masks each block from whole rows of ids
      out.documents = loom::context_parallel::gather_rows(piece, ring);
      return out;
    }
    const at::Tensor docs = loom::sequence_parallel::gather_rows(piece, seq);  // (B, T): whole rows
    const int64_t T = docs.size(1);
    const at::Tensor other_document = docs.unsqueeze(2).ne(docs.unsqueeze(1));  // (B, T, T)
    const at::Tensor rows = causal.defined() ? causal.narrow(0, 0, T).narrow(1, 0, T) : causal_rows(0, T, T, docs.device());
    out.mask = rows.unsqueeze(0).masked_fill(other_document, -INFINITY);  // (B, T, T)
  }
  return out;
}

}  // namespace loom_gpt
