#include "train/sparse_table_rows.hpp"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <vector>

#include "base/failure.hpp"
#include "checkpoint/row_parts.hpp"
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

}  // namespace

void make_table_row_part(Snapshot& part, Pipeline& p, Communicator& comm) {
  const std::vector<RowTensor> tensors = row_tensors(p);
  const int64_t rank = comm.rank(), ranks = comm.world_size();
  std::vector<int64_t> counts;
  for (const RowTensor& t : tensors) counts.push_back(t.tensor->size(0));
  at::Tensor totals = at::tensor(counts, at::kLong);
  comm.allreduce_sum(totals);  // each table's rows, over the ranks
  nlohmann::json layout_rows = nlohmann::json::object(), my_rows = nlohmann::json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const RowTensor& t = tensors[i];
    const int64_t rows = totals[static_cast<int64_t>(i)].item<int64_t>();
    if (held_row_count(rows, rank, ranks) != counts[i])
      throw runtime_failure("\"" + t.name + "\": this rank holds " + std::to_string(counts[i]) + " of its " +
                            std::to_string(rows) + " rows, not rows r R / N .. (r + 1) R / N - 1 "
                            "(<loom/sparse_tables.hpp> rows_held); the model splits its tables another way");
    layout_rows[t.name] = rows;
    my_rows[t.name] = {first_held_row(rows, rank, ranks), counts[i]};
    const std::string part_name = kShardRowsPrefix + t.name;
    bool renamed = false;  // rank 0's capture_snapshot copied its rows under the whole name
    for (auto& [name, tensor] : part.tensors)
      if (name == t.name) {
        name = part_name;
        renamed = true;
      }
    if (!renamed) part.tensors.emplace_back(part_name, cpu_copy(*t.tensor));
  }
  nlohmann::json metadata = {{"format", "loom-checkpoint-part"}};
  if (rank == 0) {
    metadata = nlohmann::json::parse(part.metadata_json);
    metadata["shard"] = {{"mode", "none"}, {"world_size", ranks}, {"groups", nlohmann::json::array()},
                         {"elementwise", nlohmann::json::object()}, {"rows", layout_rows}};
  }
  metadata["part"] = {{"rank", rank}, {"slices", nlohmann::json::array()}, {"rows", my_rows}};
  part.metadata_json = metadata.dump();
}

void cut_table_rows(LoadedCheckpoint& loaded, Pipeline& p, int rank, int ranks, const std::string& origin) {
  for (const RowTensor& t : row_tensors(p)) {
    const auto it = loaded.tensors.find(t.name);
    if (it == loaded.tensors.end() || it->second.dim() < 1) continue;  // restoring names what is missing
    if (loaded.rows_windowed.count(t.name) != 0) {  // the reader read this rank's rows alone
      if (it->second.size(0) != t.tensor->size(0))
        throw usage_failure(origin + ": \"" + t.name + "\" gives rank " + std::to_string(rank) + " of " +
                            std::to_string(ranks) + " " + std::to_string(it->second.size(0)) + " rows, but this "
                            "run's rank holds " + std::to_string(t.tensor->size(0)) +
                            "; resume with the table sizes that wrote it");
      continue;
    }
    const int64_t rows = it->second.size(0), mine = held_row_count(rows, rank, ranks);
    if (mine != t.tensor->size(0))
      throw usage_failure(origin + ": \"" + t.name + "\" has " + std::to_string(rows) + " rows in the checkpoint, of "
                          "which rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " would hold " +
                          std::to_string(mine) + ", but this run's rank holds " + std::to_string(t.tensor->size(0)) +
                          "; resume with the table sizes that wrote it");
    it->second = it->second.narrow(0, first_held_row(rows, rank, ranks), mine);
  }
}

}  // namespace loom
