// sparse_tables.hpp: the model's row-sparse tables (LOOM_PARAM_FLAG_SPARSE_ROWS, ABI 1.7), kept
// out of the flat buffers. The model looks rows up with sparse-gradient lookups, so after
// backward each table's .grad is a sparse COO tensor naming only the rows the step touched.
// collect() turns that into (rows, values) pairs summed over micro-batches and ranks; the
// [sparse_optimizer] then updates those rows alone. Nothing here costs in proportion to a
// table's size: a 10-million-row table's step touches what the batch touched.
//
// Across ranks the tables are replicated and the gradients are exchanged as (row, value)
// pairs: every rank gathers every rank's pairs in rank order and sums them the same way, so
// the tables and the optimizer's per-row state stay identical on every rank.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

#include <memory>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "dist/communicator.hpp"

namespace loom {

// The model's trainable parameters split by LOOM_PARAM_FLAG_SPARSE_ROWS (frozen ones are in neither).
std::vector<ModelParam> dense_params(const std::vector<ModelParam>& params);
std::vector<ModelParam> sparse_params(const std::vector<ModelParam>& params);

class SparseTables {
 public:
  // tables: the model's parameters flagged LOOM_PARAM_FLAG_SPARSE_ROWS; model: its name, for messages.
  SparseTables(std::vector<ModelParam> tables, const std::string& model);
  SparseTables(const SparseTables&) = delete;
  SparseTables& operator=(const SparseTables&) = delete;

  bool empty() const { return tables_.empty(); }
  // The ABI view handed to the [sparse_optimizer] (no dense groups); valid as long as this object.
  const loom_param_groups& abi() const { return abi_groups_; }
  int64_t numel() const;
  int64_t bytes() const;

  // After the step's backward: takes each table's sparse gradient (and clears it for the next
  // step) and sums it across ranks.
  void collect(Communicator* comm);
  // Sum of squares of the collected values (0-dim fp32 on the device), for the global norm.
  at::Tensor square_sum() const;
  void scale(const at::Tensor& factor);
  // Rows the step touched, summed over tables (after collect).
  int64_t rows_touched() const;
  const std::vector<OptimizerInstance::SparseGrad>& grads() const { return grads_; }

 private:
  std::vector<ModelParam> tables_;
  std::vector<loom_sparse_table> views_;
  std::vector<const loom_sparse_table*> view_pointers_;
  loom_param_groups abi_groups_{};
  std::vector<OptimizerInstance::SparseGrad> grads_;
};

}  // namespace loom
