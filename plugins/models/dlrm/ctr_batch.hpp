// ctr_batch.hpp: a click-through-rate batch as the criteo_tsv dataset hands it over (named
// fields, ABI 1.2), checked before any lookup so that a wrong layout or an id outside its
// table is one clear line instead of an out-of-bounds read.
//
//   labels              int64 [B, 1], 0 or 1
//   dense_features      float32 [B, D]
//   sparse_ids_values   int64 [N], each already hashed into its table's rows
//   sparse_ids_offsets  int64 [F * B + 1], feature-major CSR: feature f of sample b holds
//                       values[offsets[f*B + b] .. offsets[f*B + b + 1])
#pragma once

#include <loom/model.hpp>

#include <vector>

namespace dlrm {

struct CtrBatch {
  at::Tensor dense;   // float [B, D]
  at::Tensor labels;  // float [B]
  struct Bag {
    at::Tensor ids;      // int64 [n_f]
    at::Tensor offsets;  // int64 [B + 1], starting at 0 (embedding_bag's include_last_offset form)
  };
  std::vector<Bag> features;  // one per sparse feature
};

// rows: each table's row count. Throws loom::Error naming the field and what is wrong.
CtrBatch read_ctr_batch(const loom::BatchFields& batch, int64_t dense_features, const std::vector<int64_t>& rows);

}  // namespace dlrm
