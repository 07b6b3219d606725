// criteo_batch_builder.cpp: samples into the criteo_tsv batch layout (criteo_batch_builder.hpp).
#include "criteo_batch_builder.hpp"

#include <memory>
#include <utility>

namespace loom::criteo {

namespace {

// Owns a tensor until it is handed over, so a failure halfway through frees what was made.
struct FreeTensor {
  void operator()(DLManagedTensor* t) const {
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
};
using OwnedTensor = std::unique_ptr<DLManagedTensor, FreeTensor>;

}  // namespace

void BatchBuilder::add(int64_t stream_index, const Sample& sample) {
  inputs_.push_back(stream_index);
  labels_.push_back(sample.label);
  dense_values_.insert(dense_values_.end(), sample.dense.begin(), sample.dense.end());
  const int64_t base = int64_t(ids_.size());
  for (int64_t f = 0; f < sparse_; ++f) id_begins_.push_back(base + (f == 0 ? 0 : sample.id_ends[size_t(f - 1)]));
  ids_.insert(ids_.end(), sample.ids.begin(), sample.ids.end());
}

loom::Dataset::Batch BatchBuilder::take() {
  const int64_t B = rows(), S = sparse_;
  // id_begins_ runs sample-major, so the entry after (b, f) is where (b, f) ends.
  const auto end_of = [&](size_t i) { return i + 1 < id_begins_.size() ? id_begins_[i + 1] : int64_t(ids_.size()); };
  std::vector<int64_t> values, offsets(size_t(S * B + 1), 0);
  values.reserve(ids_.size());
  for (int64_t f = 0; f < S; ++f)
    for (int64_t b = 0; b < B; ++b) {
      const size_t i = size_t(b * S + f);
      values.insert(values.end(), ids_.begin() + id_begins_[i], ids_.begin() + end_of(i));
      offsets[size_t(f * B + b + 1)] = int64_t(values.size());
    }
  const int64_t N = int64_t(values.size());

  OwnedTensor inputs(loom::dlpack_int64(std::move(inputs_), {B, 1}));
  OwnedTensor targets(loom::dlpack_int64(std::move(labels_), {B, 1}));
  OwnedTensor dense(loom::dlpack_tensor<float>(std::move(dense_values_), {B, dense_}));
  OwnedTensor id_values(loom::dlpack_int64(std::move(values), {N}));
  OwnedTensor id_offsets(loom::dlpack_int64(std::move(offsets), {S * B + 1}));
  inputs_.clear();
  labels_.clear();
  dense_values_.clear();
  ids_.clear();
  id_begins_.clear();

  loom::Dataset::Batch batch{nullptr, nullptr};
  batch.fields = {{"dense_features", nullptr}, {"sparse_ids_values", nullptr}, {"sparse_ids_offsets", nullptr}};
  batch.inputs = inputs.release();  // nothing below can throw
  batch.targets = targets.release();
  batch.fields[0].tensor = dense.release();
  batch.fields[1].tensor = id_values.release();
  batch.fields[2].tensor = id_offsets.release();
  return batch;
}

}  // namespace loom::criteo
