// loom/sparse_tables.hpp: sparse tables split by rows over the ranks ([distributed]
// sparse_tables = "row_sharded", ABI 1.14), as TorchRec's row-wise sharding does: rank r of N
// holds rows r R / N .. (r + 1) R / N - 1 of a table of R rows (integer division) and their
// optimizer state, so no rank holds a whole table.
//
// A model registers only its rows (rows_held), flagged LOOM_PARAM_FLAG_SPARSE_ROWS |
// LOOM_PARAM_FLAG_ROW_SHARD, and looks ids up through lookup(): each rank deduplicates the ids
// of its batch, sends each unique (table, row) to the rank that holds it in one all-to-all over
// LOOM_COLLECTIVE_GROUP_SPARSE, and gets the rows back in a second; in backward the gradient
// of each unique row goes back to its owner the same way, where the host finds it as the
// shard's sparse gradient. Pooling (sum, mean) then runs where the batch is, on the unique
// rows (at::embedding_bag over them with the inverse indices), so only unique rows travel.
//
// The messages to each rank differ in length; the all-to-all moves equal chunks, so a small
// all-reduce first finds the largest, every chunk is padded to it, and padding asks for row -1.
// On a GPU that size is read on the host (one wait per step). For a group of one this is a plain
// lookup with a sparse gradient.
#pragma once

#include <loom/model.hpp>
#include <loom/tensor_parallel.hpp>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

namespace loom::sparse_tables {

struct Group {
  int64_t rank = 0, size = 1;
  Group() = default;
  explicit Group(const Context& ctx) : rank(ctx.sparse_shard_rank), size(ctx.sparse_shard_size) {}
  bool split() const { return size > 1; }
};

// The first row rank `rank` of `size` holds of a table of `rows` rows.
inline int64_t first_row(int64_t rows, int64_t rank, int64_t size) { return rows * rank / size; }

struct RowRange {
  int64_t begin = 0, end = 0;  // rows [begin, end) of the whole table
  int64_t count() const { return end - begin; }
};

// The rows this rank holds of a table of `rows` rows (all of them for a group of one).
inline RowRange rows_held(int64_t rows, const Group& g) {
  return {first_row(rows, g.rank, g.size), first_row(rows, g.rank + 1, g.size)};
}

namespace detail {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

inline at::Tensor all_to_all(const at::Tensor& x) {
  return tensor_parallel::collective(LOOM_COLLECTIVE_ALL_TO_ALL, x, LOOM_COLLECTIVE_GROUP_SPARSE);
}

// The rows of the tables' shards asked for, answered, and the answers' gradient sent back.
// asked_table, asked_row: [N * M], what each rank asked this one for (table, row within this
// rank's share; -1 in padding); mine: [sum U], the slot of each of this rank's own requests.
struct ServeRows : torch::autograd::Function<ServeRows> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList shards, const at::Tensor& asked_table,
                            const at::Tensor& asked_row, const at::Tensor& mine) {
    const int64_t dim = shards.front().size(1);
    at::Tensor answer = at::zeros({asked_table.size(0), dim}, shards.front().options());  // [N * M, dim]
    for (size_t f = 0; f < shards.size(); ++f) {
      const at::Tensor slots = asked_table.eq(static_cast<int64_t>(f)).nonzero().squeeze(1);
      answer.index_copy_(0, slots, shards[f].detach().index_select(0, asked_row.index_select(0, slots)));
    }
    ctx->save_for_backward({asked_table, asked_row, mine});
    std::vector<int64_t> rows;
    for (const at::Tensor& s : shards) rows.push_back(s.size(0));
    ctx->saved_data["rows"] = rows;
    return all_to_all(answer).index_select(0, mine);  // [sum U, dim], in the order asked
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &asked_table = saved[0], &asked_row = saved[1], &mine = saved[2];
    const std::vector<int64_t> rows = ctx->saved_data["rows"].toIntVector();
    const at::Tensor& grad = grads[0];  // [sum U, dim]
    variable_list out(rows.size() + 3);  // nothing for the routes
    if (!grad.defined()) return out;     // the rows were not used: no gradient to send
    at::Tensor send = at::zeros({asked_table.size(0), grad.size(1)}, grad.options());
    send.index_copy_(0, mine, grad);
    const at::Tensor got = all_to_all(send);  // [N * M, dim]: the gradient of every row this rank was asked for
    for (size_t f = 0; f < rows.size(); ++f) {
      const at::Tensor slots = asked_table.eq(static_cast<int64_t>(f)).nonzero().squeeze(1);
      out[f] = at::sparse_coo_tensor(asked_row.index_select(0, slots).unsqueeze(0), got.index_select(0, slots),
                                     {rows[f], grad.size(1)});
    }
    return out;
  }
};

}  // namespace detail

// Per table f: its unique ids' rows [U_f, dim] and, for each id of ids[f], the index of its row
// among them; at::embedding_bag(rows[f], inverse[f], offsets, ...) then pools as over the table.
struct Rows {
  std::vector<at::Tensor> rows, inverse;
};

// shards[f]: this rank's rows of table f (rows_held(table_rows[f], g)), one width for all;
// ids[f]: int64 ids into the whole table, already checked to lie in [0, table_rows[f]). Every
// rank of the group calls it with its own batch, the same tables in the same order.
inline Rows lookup(const std::vector<at::Tensor>& shards, const std::vector<int64_t>& table_rows,
                   const std::vector<at::Tensor>& ids, const Group& g) {
  Rows out;
  std::vector<at::Tensor> tables, local_rows, owners;
  std::vector<int64_t> unique_counts;
  for (size_t f = 0; f < shards.size(); ++f) {
    auto [unique, inverse] = at::_unique(ids[f], /*sorted=*/true, /*return_inverse=*/true);
    out.inverse.push_back(inverse);
    unique_counts.push_back(unique.size(0));
    std::vector<int64_t> firsts;  // the first row of every rank's share
    for (int64_t r = 0; r < g.size; ++r) firsts.push_back(first_row(table_rows[f], r, g.size));
    const at::Tensor first = at::tensor(firsts, unique.options());
    const at::Tensor owner = g.split() ? at::searchsorted(first.narrow(0, 1, g.size - 1), unique, false, /*right=*/true)
                                       : at::zeros_like(unique);
    owners.push_back(owner);
    tables.push_back(at::full_like(unique, static_cast<int64_t>(f)));
    local_rows.push_back(unique - first.index_select(0, owner));  // the row within its owner's share
  }
  if (!g.split()) {  // the whole tables are here: a plain lookup with a sparse gradient
    for (size_t f = 0; f < shards.size(); ++f)
      out.rows.push_back(at::embedding(shards[f], local_rows[f], -1, false, /*sparse=*/true));
    return out;
  }
  const at::Tensor owner = at::cat(owners), table = at::cat(tables), row = at::cat(local_rows);  // [sum U]
  const at::Tensor order = std::get<1>(at::sort(owner, /*stable=*/true, 0, false));  // requests grouped by owner
  const at::Tensor counts = at::bincount(owner, {}, g.size);                          // [N] requests to each rank
  const int64_t width = tensor_parallel::collective(LOOM_COLLECTIVE_ALL_REDUCE_MAX, counts.max().reshape({1}),
                                                    LOOM_COLLECTIVE_GROUP_SPARSE)
                            .item<int64_t>();
  const int64_t M = std::max<int64_t>(width, 1);
  // Each request's slot: owner * M + its place among the requests to that owner.
  const at::Tensor sorted_owner = owner.index_select(0, order);
  const at::Tensor first_of_owner = at::cumsum(counts, 0) - counts;  // [N]
  const at::Tensor place = at::arange(owner.size(0), owner.options()) - first_of_owner.index_select(0, sorted_owner);
  at::Tensor mine = at::empty_like(owner);
  mine.index_copy_(0, order, sorted_owner * M + place);  // back in unique-id order
  at::Tensor ask = at::full({g.size * M, 2}, -1, owner.options());
  ask.index_copy_(0, mine, at::stack({table, row}, 1));
  const at::Tensor asked = detail::all_to_all(ask);  // [N * M, 2]: what each rank asks this one
  const at::Tensor values = detail::ServeRows::apply(at::TensorList(shards), asked.select(1, 0).contiguous(),
                                                     asked.select(1, 1).contiguous(), mine);
  out.rows = values.split_with_sizes(unique_counts, 0);
  return out;
}

}  // namespace loom::sparse_tables
