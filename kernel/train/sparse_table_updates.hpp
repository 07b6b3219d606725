// sparse_table_updates.hpp: the model's row-sparse tables (LOOM_PARAM_FLAG_SPARSE_ROWS, ABI 1.7), kept
// out of the flat buffers. The model looks rows up with sparse-gradient lookups, so after
// backward each table's .grad is a sparse COO tensor naming only the rows the step touched.
// collect() turns that into (rows, values) pairs summed over micro-batches and ranks; the
// [sparse_optimizer] then updates those rows alone. Nothing here costs in proportion to a
// table's size: a 10-million-row table's step touches what the batch touched.
//
// Replicated tables ([distributed] sparse_tables = "replicated", the default): the gradients
// are exchanged as (row, value) pairs: every rank gathers every rank's pairs in rank order and
// sums them the same way, so the tables and the optimizer's per-row state stay identical on
// every rank.
//
// Row-sharded tables ("row_sharded", ABI 1.14): each of N ranks holds rows r R / N ..
// (r + 1) R / N - 1 of every table (LOOM_PARAM_FLAG_ROW_SHARD) and the optimizer state of those
// rows alone. The model's lookups (loom/sparse_tables.hpp) already sent every rank's gradient
// rows to their owner over the sparse group (SparseShardGroup), so collect() keeps each rank's
// gradient where it is; only the squares for the global gradient norm are summed.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "abi/compute_components.hpp"
#include "dist/communicator.hpp"
#include "train/mesh_groups.hpp"
#include "train/run_plan.hpp"

namespace loom {

// The model's trainable parameters this rank holds, split by LOOM_PARAM_FLAG_SPARSE_ROWS (frozen ones
// and those of other pipeline stages' layers are in neither).
std::vector<ModelParam> dense_params(const std::vector<ModelParam>& params);
std::vector<ModelParam> sparse_params(const std::vector<ModelParam>& params);

// Throws a usage Failure naming [distributed] sparse_tables when it is not a known value, or
// "row_sharded" comes with what this slice does not build yet (tensor, sequence or expert
// parallelism; a sharded save, [export]).
void check_sparse_tables(const RunPlan& plan, int world_size);

// The ranks that split the sparse tables by rows (every rank of the run), serving the model's
// LOOM_COLLECTIVE_GROUP_SPARSE collectives while it lives.
class SparseShardGroup {
 public:
  explicit SparseShardGroup(Communicator& world);
  ~SparseShardGroup();
  SparseShardGroup(const SparseShardGroup&) = delete;
  SparseShardGroup& operator=(const SparseShardGroup&) = delete;
  Communicator& comm() { return *comm_; }
  // Bytes the model's lookups sent to the other ranks since the last call.
  int64_t take_sent_bytes() { return calls_->take_sent_bytes(); }

 private:
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<CommunicatorCollectives> calls_;
};

class SparseTables {
 public:
  // tables: the model's parameters flagged LOOM_PARAM_FLAG_SPARSE_ROWS; model: its name, for
  // messages; row_sharded: [distributed] sparse_tables = "row_sharded" over more than one rank
  // (every table must then carry LOOM_PARAM_FLAG_ROW_SHARD, and none may otherwise).
  SparseTables(std::vector<ModelParam> tables, const std::string& model, bool row_sharded = false);
  SparseTables(const SparseTables&) = delete;
  SparseTables& operator=(const SparseTables&) = delete;

  bool empty() const { return tables_.empty(); }
  bool row_sharded() const { return row_sharded_; }
  const std::vector<ModelParam>& tables() const { return tables_; }
  // The ABI view handed to the [sparse_optimizer] (no dense groups); valid as long as this object.
  const loom_param_groups& abi() const { return abi_groups_; }
  int64_t numel() const;
  int64_t bytes() const;

  // After the step's backward: takes each table's sparse gradient (and clears it for the next
  // step) and sums it across ranks (replicated), or keeps it on its owner (row-sharded).
  void collect(Communicator* comm);
  // Sum of squares of the collected values (0-dim fp32 on the device), for the global norm;
  // row-sharded, summed over the ranks (a collective: every rank calls it once a step).
  at::Tensor square_sum() const;
  void scale(const at::Tensor& factor);
  // Rows the step touched, summed over tables (after collect).
  int64_t rows_touched() const;
  // Replicated: the bytes of (row, value) pairs this rank sent to the others since the last call.
  int64_t take_sent_bytes() { return std::exchange(sent_bytes_, 0); }
  const std::vector<OptimizerInstance::SparseGrad>& grads() const { return grads_; }

 private:
  std::vector<ModelParam> tables_;
  std::vector<loom_sparse_table> views_;
  std::vector<const loom_sparse_table*> view_pointers_;
  loom_param_groups abi_groups_{};
  std::vector<OptimizerInstance::SparseGrad> grads_;
  bool row_sharded_ = false;
  Communicator* comm_ = nullptr;  // the last collect's, for the row-sharded norm
  int64_t sent_bytes_ = 0;
};

}  // namespace loom
