#include "train/sparse_table_rows.hpp"

#include <ATen/core/grad_mode.h>

#include <vector>

#include "base/failure.hpp"
#include "train/run_state.hpp"

namespace loom {
namespace {

// A tensor whose dim 0 follows a table's rows, under its checkpoint name.
struct RowTensor {
  std::string name;
  at::Tensor* tensor;
};

std::vector<RowTensor> row_tensors(Pipeline& p) {
  std::vector<RowTensor> out;
  const auto& tables = p.sparse.tables();
  for (const ModelParam& t : tables) out.push_back({"model/" + t.name, t.tensor});
  if (!p.sparse_optimizer) return out;
  for (const auto& st : p.sparse_optimizer->state()) {
    if (st.elementwise_group < 0) continue;  // whole-tensor state: the same on every rank
    const auto table = static_cast<size_t>(st.elementwise_group);
    if (table >= tables.size() || st.tensor->dim() < 1 || st.tensor->size(0) != tables[table].tensor->size(0))
      throw runtime_failure("sparse optimizer " + p.sparse_optimizer->component().name + ": state \"" + st.name +
                            "\" is declared per row of table " + std::to_string(st.elementwise_group) +
                            " (add_row_state) but its dim 0 is not that table's rows; fix the plugin");
    out.push_back({kSparseOptimizerPrefix + st.name, st.tensor});
  }
  return out;
}

int64_t held(int64_t rows, int64_t rank, int64_t ranks) {
  return first_held_row(rows, rank + 1, ranks) - first_held_row(rows, rank, ranks);
}

}  // namespace

int64_t first_held_row(int64_t rows, int64_t rank, int64_t ranks) { return rows * rank / ranks; }

void gather_table_rows(Snapshot* snapshot, Pipeline& p, Communicator& comm) {
  at::NoGradGuard no_grad;
  const int ranks = comm.world_size();
  for (const RowTensor& t : row_tensors(p)) {
    at::Tensor total = at::full({1}, t.tensor->size(0), at::kLong);
    comm.allreduce_sum(total);
    const int64_t rows = total.item<int64_t>();
    if (held(rows, comm.rank(), ranks) != t.tensor->size(0))
      throw runtime_failure("\"" + t.name + "\": this rank holds " + std::to_string(t.tensor->size(0)) + " of its " +
                            std::to_string(rows) + " rows, not rows r R / N .. (r + 1) R / N - 1 "
                            "(<loom/sparse_tables.hpp> rows_held); the model splits its tables another way");
    std::vector<at::Tensor> pieces;
    for (int r = 0; r < ranks; ++r) {
      std::vector<int64_t> shape = t.tensor->sizes().vec();
      shape[0] = held(rows, r, ranks);
      at::Tensor piece = r == comm.rank() ? t.tensor->detach().clone() : at::empty(shape, t.tensor->options());
      comm.broadcast(piece, r);
      if (snapshot) pieces.push_back(piece.cpu());
    }
    if (!snapshot) continue;
    bool replaced = false;
    for (auto& [name, tensor] : snapshot->tensors)
      if (name == t.name) {
        tensor = at::cat(pieces);
        replaced = true;
      }
    if (!replaced) throw runtime_failure("a checkpoint of row-sharded tables lacks \"" + t.name + "\"");
  }
}

void cut_table_rows(LoadedCheckpoint& loaded, Pipeline& p, int rank, int ranks, const std::string& origin) {
  for (const RowTensor& t : row_tensors(p)) {
    const auto it = loaded.tensors.find(t.name);
    if (it == loaded.tensors.end() || it->second.dim() < 1) continue;  // restoring names what is missing
    const int64_t rows = it->second.size(0), mine = held(rows, rank, ranks);
    if (mine != t.tensor->size(0))
      throw usage_failure(origin + ": \"" + t.name + "\" has " + std::to_string(rows) + " rows in the checkpoint, of "
                          "which rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " would hold " +
                          std::to_string(mine) + ", but this run's rank holds " + std::to_string(t.tensor->size(0)) +
                          "; resume with the table sizes that wrote it");
    it->second = it->second.narrow(0, first_held_row(rows, rank, ranks), mine);
  }
}

}  // namespace loom
