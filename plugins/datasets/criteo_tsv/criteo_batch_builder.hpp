// criteo_batch_builder.hpp: parsed samples gathered into one loom batch (the layout the model reads):
//   inputs              int64 [B, 1]   each sample's line index in the stream within its pass
//   targets             int64 [B, 1]   the label, 0 or 1
//   dense_features      float32 [B, dense]
//   sparse_ids_values   int64 [N]      hashed rows of all samples' categorical ids
//   sparse_ids_offsets  int64 [sparse * B + 1], feature-major CSR: the rows of feature f of
//                       sample b are values[offsets[f * B + b] .. offsets[f * B + b + 1])
// Uses the SDK's DLPack helpers; torch-free.
#pragma once

#include <loom/dataset.hpp>

#include <cstdint>
#include <vector>

#include "criteo_line.hpp"

namespace loom::criteo {

class BatchBuilder {
 public:
  BatchBuilder(int64_t dense, int64_t sparse) : dense_(dense), sparse_(sparse) {}

  void add(int64_t stream_index, const Sample& sample);
  int64_t rows() const { return int64_t(inputs_.size()); }
  // The batch of the samples added since the last take, in the layout above (B = 0 when none).
  loom::Dataset::Batch take();

 private:
  int64_t dense_, sparse_;
  std::vector<int64_t> inputs_, labels_;
  std::vector<float> dense_values_;
  std::vector<int64_t> ids_;        // sample after sample, each feature after feature
  std::vector<int64_t> id_begins_;  // [b * sparse + f]: where feature f of sample b starts in ids_
};

}  // namespace loom::criteo
