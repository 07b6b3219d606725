#include "train/sparse_table_updates.hpp"

#include <loom/torch.hpp>

#include <map>

#include "base/failure.hpp"

namespace loom {

std::vector<ModelParam> dense_params(const std::vector<ModelParam>& params) {
  std::vector<ModelParam> out;
  for (const ModelParam& p : params)
    if (!(p.flags & LOOM_PARAM_FLAG_SPARSE_ROWS) && !p.frozen && !p.elsewhere) out.push_back(p);
  return out;
}

std::vector<ModelParam> sparse_params(const std::vector<ModelParam>& params) {
  std::vector<ModelParam> out;
  for (const ModelParam& p : params)
    if ((p.flags & LOOM_PARAM_FLAG_SPARSE_ROWS) && !p.frozen && !p.elsewhere) out.push_back(p);
  return out;
}

namespace {

// Unique ascending rows and the sum of the values given for each.
void coalesce_rows(at::Tensor& rows, at::Tensor& values) {
  auto [unique, inverse] = at::_unique(rows, /*sorted=*/true, /*return_inverse=*/true);
  at::Tensor summed = at::zeros({unique.size(0), values.size(1)}, values.options());
  summed.index_add_(0, inverse, values);
  rows = unique;
  values = summed;
}

// Per table: sums every rank's (rows, values) pairs (rows int64 [n], values [n, dim]; n may
// differ by rank) into unique ascending rows with summed values, identical on every rank.
// Returns the bytes this rank sent (its pairs, to every other rank).
int64_t sum_sparse_rows(std::vector<at::Tensor>& rows, std::vector<at::Tensor>& values, Communicator* comm) {
  if (comm == nullptr || comm->world_size() == 1 || rows.empty()) return 0;
  int64_t sent = 0;
  // One ragged all-gather for every table of one width: each pair travels as a row of
  // (table, row, values...) in fp64 (exact for row numbers below 2^53).
  std::map<int64_t, std::vector<size_t>> by_width;
  for (size_t t = 0; t < rows.size(); ++t) by_width[values[t].size(1)].push_back(t);
  for (const auto& [width, tables] : by_width) {
    std::vector<at::Tensor> packed;
    for (size_t t : tables)
      packed.push_back(at::cat({at::full({rows[t].size(0), 1}, static_cast<double>(t), at::kDouble),
                                rows[t].to(at::kCPU, at::kDouble).unsqueeze(1), values[t].to(at::kCPU, at::kDouble)},
                               1));
    const at::Tensor own = at::cat(packed);
    sent += static_cast<int64_t>(own.nbytes()) * (comm->world_size() - 1);
    const at::Tensor all = comm->allgather_rows(own);
    const at::Tensor table_of = all.select(1, 0);
    for (size_t t : tables) {
      const at::Tensor mine = all.index({table_of.eq(static_cast<double>(t))});
      rows[t] = mine.select(1, 1).to(rows[t].device(), at::kLong);
      values[t] = mine.narrow(1, 2, width).to(values[t].device(), values[t].scalar_type());
      coalesce_rows(rows[t], values[t]);
    }
  }
  return sent;
}

}  // namespace

void check_sparse_tables(const RunPlan& plan, int world_size) {
  const DistributedSettings& d = plan.distributed;
  if (d.sparse_tables == "replicated" || world_size <= 1) return;
  const std::string what = "[distributed] sparse_tables = \"row_sharded\"";
  std::string missing;
  if (d.tensor_parallel > 1 || d.sequence_parallel > 1 || d.context_parallel > 1 || d.expert_parallel > 1)
    missing = "tensor_parallel, sequence_parallel, context_parallel or expert_parallel > 1";
  else if (plan.checkpoint_backend.component != nullptr && d.shard != "none")
    missing = "[checkpoint] and shard = \"" + d.shard + "\" (a sharded save of row-sharded tables)";
  else if (plan.hf_export.enabled)
    missing = "[export]";
  if (!missing.empty())
    throw usage_failure(what + " with " + missing + " is not built yet; use sparse_tables = \"replicated\" for it");
}

SparseShardGroup::SparseShardGroup(Communicator& world) {
  std::vector<int> ranks(static_cast<size_t>(world.world_size()));
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  comm_ = std::make_unique<Communicator>(world, ranks, "sparse");
  calls_ = std::make_unique<CommunicatorCollectives>(*comm_);
  set_group_collectives(LOOM_COLLECTIVE_GROUP_SPARSE, calls_.get());
}

SparseShardGroup::~SparseShardGroup() { set_group_collectives(LOOM_COLLECTIVE_GROUP_SPARSE, nullptr); }

SparseTables::SparseTables(std::vector<ModelParam> tables, const std::string& model, bool row_sharded)
    : tables_(std::move(tables)), row_sharded_(row_sharded) {
  views_.resize(tables_.size());
  for (size_t i = 0; i < tables_.size(); ++i) {
    const at::Tensor& w = *tables_[i].tensor;
    if (w.dim() != 2 || !w.is_contiguous() || !at::isFloatingType(w.scalar_type()))
      throw runtime_failure("model " + model + ": sparse table \"" + tables_[i].name +
                            "\" must be a contiguous floating [rows, dim] tensor (LOOM_PARAM_FLAG_SPARSE_ROWS)");
    const bool shard = (tables_[i].flags & LOOM_PARAM_FLAG_ROW_SHARD) != 0;
    if (shard != row_sharded)
      throw usage_failure(
          "model " + model + ": sparse table \"" + tables_[i].name + "\" " +
          (row_sharded ? "is whole on every rank under [distributed] sparse_tables = \"row_sharded\" (no "
                         "LOOM_PARAM_FLAG_ROW_SHARD, ABI 1.14): this model does not split its tables; use "
                         "sparse_tables = \"replicated\""
                       : "is flagged LOOM_PARAM_FLAG_ROW_SHARD, but the tables are replicated: a plugin bug"));
    views_[i].struct_size = sizeof(loom_sparse_table);
    views_[i].name = tables_[i].name.c_str();
    views_[i].weight = handle(*tables_[i].tensor);
  }
  for (const loom_sparse_table& v : views_) view_pointers_.push_back(&v);
  abi_groups_.struct_size = sizeof(abi_groups_);
  abi_groups_.sparse_tables = view_pointers_.data();
  abi_groups_.sparse_table_count = view_pointers_.size();
}

int64_t SparseTables::numel() const {
  int64_t n = 0;
  for (const ModelParam& t : tables_) n += t.tensor->numel();
  return n;
}

int64_t SparseTables::bytes() const {
  int64_t n = 0;
  for (const ModelParam& t : tables_) n += static_cast<int64_t>(t.tensor->nbytes());
  return n;
}

void SparseTables::collect(Communicator* comm) {
  std::vector<at::Tensor> rows(tables_.size()), values(tables_.size());
  for (size_t i = 0; i < tables_.size(); ++i) {
    at::Tensor& weight = *tables_[i].tensor;
    const at::Tensor grad = weight.mutable_grad();
    if (grad.defined() && grad.is_sparse()) {
      // Row-sharded, a row's entries are the ranks' gradients for it: summed in fp64 and rounded
      // once, as the replicated exchange sums them, so both settings take the same steps.
      const at::Tensor g = row_sharded_ ? grad.to(at::kDouble).coalesce() : grad.coalesce();
      rows[i] = g._indices().select(0, 0).contiguous();
      values[i] = g._values().to(weight.scalar_type()).contiguous();
    } else if (grad.defined()) {
      throw runtime_failure("sparse table \"" + tables_[i].name +
                            "\" received a dense gradient: the model must read it only through lookups with sparse "
                            "gradients (embedding_bag or embedding with sparse = true)");
    } else {  // this rank's batch touched no row of it
      rows[i] = at::empty({0}, at::TensorOptions().dtype(at::kLong).device(weight.device()));
      values[i] = at::empty({0, weight.size(1)}, weight.options());
    }
    weight.mutable_grad() = at::Tensor();  // the next step's backward starts a fresh sparse gradient
  }
  if (!row_sharded_) sent_bytes_ += sum_sparse_rows(rows, values, comm);
  // Row-sharded: a table any rank touched gets an entry everywhere (maybe without rows), so
  // per-table counts (lazy_adam's steps) move as with replicated tables.
  std::vector<bool> touched(tables_.size());
  for (size_t i = 0; i < tables_.size(); ++i) touched[i] = rows[i].size(0) > 0;
  if (row_sharded_ && comm != nullptr && !tables_.empty()) {
    at::Tensor flags = at::empty({static_cast<int64_t>(tables_.size())}, at::kInt);
    for (size_t i = 0; i < tables_.size(); ++i) flags[static_cast<int64_t>(i)] = touched[i] ? 1 : 0;
    comm->allreduce_max(flags);
    for (size_t i = 0; i < tables_.size(); ++i) touched[i] = flags[static_cast<int64_t>(i)].item<int32_t>() != 0;
  }
  grads_.clear();
  for (size_t i = 0; i < tables_.size(); ++i)
    if (touched[i]) grads_.push_back({i, rows[i], values[i]});
  comm_ = comm;
}

at::Tensor SparseTables::square_sum() const {
  if (row_sharded_ && !tables_.empty()) {  // every rank's rows count in the global norm
    at::Tensor squares = at::zeros({}, tables_.front().tensor->options().dtype(at::kFloat));
    for (const auto& g : grads_) squares += g.values.to(at::kFloat).square().sum();
    if (comm_ != nullptr) comm_->allreduce_sum(squares);
    return squares;
  }
  at::Tensor total;
  for (const auto& g : grads_) {
    const at::Tensor s = g.values.to(at::kFloat).square().sum();
    total = total.defined() ? total + s : s;
  }
  return total;
}

void SparseTables::scale(const at::Tensor& factor) {
  for (auto& g : grads_) g.values.mul_(factor.to(g.values.device(), g.values.scalar_type()));
}

int64_t SparseTables::rows_touched() const {
  int64_t n = 0;
  for (const auto& g : grads_) n += g.rows.size(0);
  return n;
}

}  // namespace loom
