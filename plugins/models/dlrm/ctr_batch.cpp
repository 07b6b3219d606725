#include "ctr_batch.hpp"

#include <string>

namespace dlrm {

CtrBatch read_ctr_batch(const loom::BatchFields& batch, int64_t dense_features, const std::vector<int64_t>& rows) {
  const auto F = static_cast<int64_t>(rows.size());
  CtrBatch out;
  const at::Tensor& labels = batch.labels;
  const int64_t B = labels.size(0);
  if (labels.dim() != 2 || labels.size(1) != 1)
    throw loom::Error("labels must be int64 [B, 1] (one click label per sample); is this a CTR dataset?");
  out.labels = labels.reshape({B}).to(at::kFloat);
  out.dense = batch.require("dense_features", at::kFloat, 2);
  if (out.dense.size(0) != B || out.dense.size(1) != dense_features)
    throw loom::Error("batch field \"dense_features\" is [" + std::to_string(out.dense.size(0)) + ", " +
                      std::to_string(out.dense.size(1)) + "], expected [" + std::to_string(B) + ", " +
                      std::to_string(dense_features) + "] (match [model] dense_features to the data)");
  const at::Tensor values = batch.require("sparse_ids_values", at::kLong, 1);
  const at::Tensor offsets = batch.require("sparse_ids_offsets", at::kLong, 1).to(at::kCPU);
  if (offsets.size(0) != F * B + 1)
    throw loom::Error("batch field \"sparse_ids_offsets\" has " + std::to_string(offsets.size(0)) +
                      " entries, expected sparse_features x B + 1 = " + std::to_string(F * B + 1) +
                      " (match [model] sparse_features to the data)");
  const int64_t* o = offsets.data_ptr<int64_t>();
  if (o[0] != 0 || o[F * B] != values.size(0))
    throw loom::Error("batch field \"sparse_ids_offsets\" must start at 0 and end at the number of ids");
  for (int64_t i = 0; i < F * B; ++i)
    if (o[i + 1] < o[i]) throw loom::Error("batch field \"sparse_ids_offsets\" decreases at entry " + std::to_string(i + 1));
  for (int64_t f = 0; f < F; ++f) {
    const int64_t begin = o[f * B], end = o[(f + 1) * B];
    CtrBatch::Bag bag{values.narrow(0, begin, end - begin), offsets.narrow(0, f * B, B + 1) - begin};
    if (bag.ids.numel() > 0) {
      const int64_t lo = bag.ids.min().item<int64_t>(), hi = bag.ids.max().item<int64_t>();
      if (lo < 0 || hi >= rows[static_cast<size_t>(f)])
        throw loom::Error("sparse feature " + std::to_string(f) + " holds id " + std::to_string(lo < 0 ? lo : hi) +
                          ", outside its table's " + std::to_string(rows[static_cast<size_t>(f)]) +
                          " rows; match [model] table_rows to [data] table_rows");
    }
    bag.offsets = bag.offsets.to(values.device());
    out.features.push_back(std::move(bag));
  }
  return out;
}

}  // namespace dlrm
