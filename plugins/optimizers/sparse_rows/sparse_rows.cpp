// sparse_rows: optimizers for the model's sparse tables (LOOM_PARAM_FLAG_SPARSE_ROWS), named in
// [sparse_optimizer]. Each step gets the rows the batch touched (unique, ascending) with their
// summed gradients and updates those rows alone; every other row, and its state, stays
// bit-identical. The cost of a step is proportional to the rows touched, not the table size.
//
//   rowwise_adagrad  one accumulator per row (the mean of the row's squared gradient), as the
//                    "row-wise Adagrad" of DLRM's embedding tables (Naumov et al.,
//                    arXiv:1906.00091; FBGEMM's EXACT_ROWWISE_ADAGRAD): state is 4 bytes a row.
//   lazy_adam        Adam whose moments move only on touched rows ("lazy" Adam, the update of
//                    PyTorch's torch.optim.SparseAdam): two [rows, dim] moments and a step
//                    count per table, bias-corrected with that count.
#include <ATen/core/grad_mode.h>
#include <loom/optimizer.hpp>

#include <cmath>
#include <string>

namespace {

// Reads rows of a table, lets `update` change them, writes them back.
template <class Update>
void update_rows(at::Tensor& table, const at::Tensor& rows, Update&& update) {
  at::Tensor values = table.index_select(0, rows);
  update(values);
  table.index_copy_(0, rows, values);
}

class RowwiseAdagrad final : public loom::SparseOptimizer {
 public:
  static constexpr const char* name = "rowwise_adagrad";
  static constexpr const char* summary =
      "Row-wise Adagrad for sparse tables: one accumulator per row, only touched rows change.";
  static constexpr loom_option_spec options[] = {
      loom::option("lr", LOOM_OPTION_TYPE_FLOAT, "0.01", "Base learning rate; the schedule scales it."),
      loom::option("eps", LOOM_OPTION_TYPE_FLOAT, "1e-8", "Added to the root of the accumulator (> 0)."),
      loom::option("initial_accumulator", LOOM_OPTION_TYPE_FLOAT, "0",
                   "Starting value of every row's accumulator (>= 0)."),
  };

  RowwiseAdagrad(const loom::Config& c, const loom::Context&, Tables tables)
      : SparseOptimizer(std::move(tables)), eps_(c.f64("eps")) {
    const double initial = c.f64("initial_accumulator");
    if (eps_ <= 0 || initial < 0) throw loom::Error("rowwise_adagrad: eps must be > 0 and initial_accumulator >= 0");
    for (size_t t = 0; t < tables_.size(); ++t) {
      const at::Tensor& w = tables_[t].weight;
      sum_.push_back(at::full({w.size(0)}, initial, w.options().dtype(at::kFloat)));
      add_row_state("sum." + std::to_string(t), t, sum_.back());
    }
  }

  void sparse_step(double lr, int64_t, const std::vector<RowGrad>& grads) override {
    at::NoGradGuard no_grad;
    for (const RowGrad& g : grads) {
      const at::Tensor grad = g.values.to(at::kFloat);
      at::Tensor sum = sum_.at(g.table).index_select(0, g.rows) + grad.square().mean(1);  // [n]
      sum_[g.table].index_copy_(0, g.rows, sum);
      const at::Tensor step = grad / (sum.sqrt() + eps_).unsqueeze(1);  // [n, dim]
      update_rows(tables_.at(g.table).weight, g.rows,
                  [&](at::Tensor& w) { w.sub_(step.to(w.scalar_type()), lr); });
    }
  }

 private:
  double eps_;
  std::vector<at::Tensor> sum_;  // per table: float [rows]
};

class LazyAdam final : public loom::SparseOptimizer {
 public:
  static constexpr const char* name = "lazy_adam";
  static constexpr const char* summary =
      "Lazy Adam for sparse tables (torch.optim.SparseAdam's update): moments move only on touched rows.";
  static constexpr loom_option_spec options[] = {
      loom::option("lr", LOOM_OPTION_TYPE_FLOAT, "0.001", "Base learning rate; the schedule scales it."),
      loom::option("beta1", LOOM_OPTION_TYPE_FLOAT, "0.9", "Decay of the first-moment average."),
      loom::option("beta2", LOOM_OPTION_TYPE_FLOAT, "0.999", "Decay of the second-moment average."),
      loom::option("eps", LOOM_OPTION_TYPE_FLOAT, "1e-8", "Added to the denominator for stability."),
  };

  LazyAdam(const loom::Config& c, const loom::Context&, Tables tables)
      : SparseOptimizer(std::move(tables)), beta1_(c.f64("beta1")), beta2_(c.f64("beta2")), eps_(c.f64("eps")) {
    if (!(beta1_ >= 0 && beta1_ < 1 && beta2_ >= 0 && beta2_ < 1) || eps_ <= 0)
      throw loom::Error("lazy_adam: beta1 and beta2 must be in [0, 1) and eps > 0");
    for (size_t t = 0; t < tables_.size(); ++t) {
      const at::Tensor& w = tables_[t].weight;
      State s{at::zeros_like(w), at::zeros_like(w), at::zeros({}, at::kLong)};
      add_row_state("exp_avg." + std::to_string(t), t, s.exp_avg);
      add_row_state("exp_avg_sq." + std::to_string(t), t, s.exp_avg_sq);
      add_state("step." + std::to_string(t), s.steps);
      state_.push_back(s);
    }
  }

  void sparse_step(double lr, int64_t, const std::vector<RowGrad>& grads) override {
    at::NoGradGuard no_grad;
    for (const RowGrad& g : grads) {
      State& s = state_.at(g.table);
      // A table counts the steps that touched it, as SparseAdam counts its parameter's steps.
      const int64_t step = s.steps.item<int64_t>() + 1;
      s.steps.fill_(step);
      const at::Tensor grad = g.values;
      const at::Tensor m_old = s.exp_avg.index_select(0, g.rows), v_old = s.exp_avg_sq.index_select(0, g.rows);
      // m += (g - m)(1 - beta1), v += (g^2 - v)(1 - beta2): SparseAdam's order of operations.
      const at::Tensor m = m_old + (grad - m_old) * (1 - beta1_);
      const at::Tensor v = v_old + (grad.square() - v_old) * (1 - beta2_);
      s.exp_avg.index_copy_(0, g.rows, m);
      s.exp_avg_sq.index_copy_(0, g.rows, v);
      const double bias1 = 1 - std::pow(beta1_, static_cast<double>(step));
      const double bias2 = 1 - std::pow(beta2_, static_cast<double>(step));
      const double step_size = lr * std::sqrt(bias2) / bias1;
      const at::Tensor update = m / (v.sqrt() + eps_) * (-step_size);
      update_rows(tables_.at(g.table).weight, g.rows, [&](at::Tensor& w) { w.add_(update); });
    }
  }

 private:
  struct State {
    at::Tensor exp_avg, exp_avg_sq;  // [rows, dim], the table's dtype
    at::Tensor steps;                // int64 scalar: steps that touched this table
  };
  double beta1_, beta2_, eps_;
  std::vector<State> state_;
};

}  // namespace

LOOM_PLUGIN("sparse_rows", "0.1.0", loom::component<RowwiseAdagrad>(), loom::component<LazyAdam>())
