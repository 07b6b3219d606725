// dlrm: a DLRM-style click-through-rate model (Naumov et al., "Deep Learning Recommendation
// Model for Personalization and Recommendation Systems", arXiv:1906.00091):
//
//   dense features [B, D] -> bottom MLP (ReLU) -> x [B, E]
//   sparse feature f      -> embedding bag over table f (sum or mean of its ids) -> e_f [B, E]
//   interaction: the dot product of every pair among (x, e_1 .. e_F), strictly below the
//                diagonal, concatenated with x -> top MLP (ReLU) -> one logit per sample
//   loss: binary cross-entropy with logits, summed over samples (units = samples)
//
// The tables are sparse (LOOM_PARAM_FLAG_SPARSE_ROWS): looked up with sparse gradients, kept
// out of the flat buffers and updated by [sparse_optimizer] on the rows a step touched. The
// MLPs are ordinary dense parameters for [optimizer]. Under [distributed] sparse_tables =
// "row_sharded" each rank holds its rows of every table only (loom/sparse_tables.hpp): the
// tables are drawn in pieces, in the same order as whole, so every rank's rows are the ones a
// replicated run starts from, and lookups go to the rows' owners. Reports `logloss` (mean over samples)
// and `auc` (LOOM_METRIC_REDUCTION_ROC_AUC: the host computes the exact AUC of the window or of
// the whole evaluation).
#include <loom/model.hpp>
#include <loom/sparse_tables.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ctr_batch.hpp"
#include "mlp_spec.hpp"

namespace {

class Dlrm final : public loom::Model {
 public:
  static constexpr const char* name = "dlrm";
  static constexpr const char* summary =
      "DLRM click-through-rate model: sparse embedding bags, bottom/top MLPs, pairwise dot interaction.";
  static constexpr loom_option_spec options[] = {
      loom::option("dense_features", LOOM_OPTION_TYPE_INT, "13", "Dense features per sample (D); Criteo has 13."),
      loom::option("sparse_features", LOOM_OPTION_TYPE_INT, "26", "Categorical features, one table each (F); Criteo has 26."),
      loom::option("table_rows", LOOM_OPTION_TYPE_STRING, "100000",
                   "Rows of each embedding table: one count for all, or a comma list with one per feature; must "
                   "match [data] table_rows."),
      loom::option("embedding_dim", LOOM_OPTION_TYPE_INT, "16", "Width E of every embedding row and of the bottom MLP's output."),
      loom::option("bottom_mlp", LOOM_OPTION_TYPE_STRING, "64,32",
                   "Hidden widths of the bottom MLP over dense features, comma-separated; a last layer to "
                   "embedding_dim follows."),
      loom::option("top_mlp", LOOM_OPTION_TYPE_STRING, "64,32",
                   "Hidden widths of the top MLP over the interactions, comma-separated; a last layer to one "
                   "logit follows."),
      loom::option("pooling", LOOM_OPTION_TYPE_STRING, "sum",
                   "How a bag of several ids becomes one vector: \"sum\" (DLRM's) or \"mean\"."),
  };

  Dlrm(const loom::Config& c, const loom::Context& ctx)
      : dense_(c.i64("dense_features")), embedding_dim_(c.i64("embedding_dim")), shard_(ctx) {
    const int64_t sparse = c.i64("sparse_features");
    if (dense_ < 1 || sparse < 1 || embedding_dim_ < 1)
      throw loom::Error("dlrm: dense_features, sparse_features and embedding_dim must be >= 1");
    const std::string pooling = c.str("pooling");
    if (pooling != "sum" && pooling != "mean")
      throw loom::Error("dlrm: pooling = \"" + pooling + "\" is not \"sum\" or \"mean\"");
    mean_pooling_ = pooling == "mean";
    rows_ = dlrm::table_rows(c.str("table_rows"), sparse);
    // Own generator: the weights depend on the run seed only.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(ctx.seed);
    const at::Device device(ctx.device);
    const uint32_t sharded = shard_.split() ? LOOM_PARAM_FLAG_ROW_SHARD : 0u;
    for (size_t f = 0; f < rows_.size(); ++f) {
      // DLRM's initialisation: uniform in +-sqrt(1 / rows).
      const double bound = std::sqrt(1.0 / static_cast<double>(rows_[f]));
      tables_.push_back(add_param("tables." + std::to_string(f) + ".weight", held_rows(rows_[f], bound, gen).to(device),
                                  LOOM_PARAM_FLAG_SPARSE_ROWS | LOOM_PARAM_FLAG_NO_DECAY | sharded));
    }
    std::vector<int64_t> bottom = dlrm::parse_int_list(c.str("bottom_mlp"), "bottom_mlp");
    bottom.insert(bottom.begin(), dense_);
    bottom.push_back(embedding_dim_);
    bottom_ = make_mlp("bottom", bottom, gen, device);
    const int64_t pairs = static_cast<int64_t>(rows_.size() + 1) * static_cast<int64_t>(rows_.size()) / 2;
    std::vector<int64_t> top = dlrm::parse_int_list(c.str("top_mlp"), "top_mlp");
    top.insert(top.begin(), embedding_dim_ + pairs);
    top.push_back(1);
    top_ = make_mlp("top", top, gen, device);
    const at::Tensor lower = at::tril_indices(static_cast<int64_t>(rows_.size()) + 1,
                                              static_cast<int64_t>(rows_.size()) + 1, -1);
    lower_i_ = lower[0].to(device);
    lower_j_ = lower[1].to(device);
  }

  at::Tensor loss_sum(const at::Tensor&, const at::Tensor&) override {
    throw loom::Error("dlrm needs the CTR batch fields (dense_features, sparse_ids_values, sparse_ids_offsets)");
  }

  at::Tensor loss_sum(const loom::BatchFields& fields) override {
    const dlrm::CtrBatch batch = dlrm::read_ctr_batch(fields, dense_, rows_);
    const at::Tensor logit = forward_logits(batch);  // [B]
    const at::Tensor loss = at::binary_cross_entropy_with_logits(logit, batch.labels, {}, {}, at::Reduction::Sum);
    const auto samples = static_cast<double>(batch.labels.size(0));
    set_units(at::full({}, samples, logit.options().dtype(at::kDouble)));
    report("logloss", loss.detach() / std::max(samples, 1.0), LOOM_METRIC_REDUCTION_MEAN);
    report("auc", at::stack({at::sigmoid(logit.detach()).to(at::kFloat), batch.labels}, 1),
           LOOM_METRIC_REDUCTION_ROC_AUC);
    return loss;
  }

 private:
  struct Linear {
    at::Tensor weight, bias;
  };

  // This rank's rows of a table drawn uniform in +-bound: the whole table drawn in pieces of at
  // most 1M rows (the generator gives the same numbers as one draw), the others' rows dropped.
  at::Tensor held_rows(int64_t rows, double bound, at::Generator& gen) const {
    const loom::sparse_tables::RowRange mine = loom::sparse_tables::rows_held(rows, shard_);
    if (mine.count() == rows) return at::empty({rows, embedding_dim_}).uniform_(-bound, bound, gen);
    at::Tensor held = at::empty({mine.count(), embedding_dim_});
    constexpr int64_t kPiece = int64_t{1} << 20;
    for (int64_t r0 = 0; r0 < rows; r0 += kPiece) {
      const int64_t n = std::min(kPiece, rows - r0);
      const at::Tensor piece = at::empty({n, embedding_dim_}).uniform_(-bound, bound, gen);
      const int64_t lo = std::max(r0, mine.begin), hi = std::min(r0 + n, mine.end);
      if (lo < hi) held.narrow(0, lo - mine.begin, hi - lo).copy_(piece.narrow(0, lo - r0, hi - lo));
    }
    return held;
  }

  std::vector<Linear> make_mlp(const std::string& prefix, const std::vector<int64_t>& widths, at::Generator& gen,
                               const at::Device& device) {
    std::vector<Linear> layers;
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      const int64_t in = widths[i], out = widths[i + 1];
      // DLRM's initialisation: weights N(0, sqrt(2 / (in + out))), biases N(0, sqrt(1 / out)).
      const double w_std = std::sqrt(2.0 / static_cast<double>(in + out)), b_std = std::sqrt(1.0 / static_cast<double>(out));
      const std::string name = prefix + "." + std::to_string(i);
      layers.push_back({add_param(name + ".weight", at::normal(0.0, w_std, {out, in}, gen).to(device)),
                        add_param(name + ".bias", at::normal(0.0, b_std, {out}, gen).to(device), LOOM_PARAM_FLAG_NO_DECAY)});
    }
    return layers;
  }

  // ReLU after every layer, except the top MLP's last (the logit).
  static at::Tensor run_mlp(const std::vector<Linear>& layers, at::Tensor x, bool last_relu) {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = at::linear(x, layers[i].weight, layers[i].bias);
      if (last_relu || i + 1 < layers.size()) x = at::relu(x);
    }
    return x;
  }

  at::Tensor forward_logits(const dlrm::CtrBatch& batch) {
    const at::Tensor x = run_mlp(bottom_, batch.dense, /*last_relu=*/true);  // [B, E]
    std::vector<at::Tensor> vectors{x};
    const int64_t mode = mean_pooling_ ? 1 : 0;  // at::embedding_bag: 0 sum, 1 mean
    if (shard_.split()) {  // each rank's unique rows from their owners, pooled here
      std::vector<at::Tensor> ids;
      for (const auto& bag : batch.features) ids.push_back(bag.ids);
      const auto looked_up = loom::sparse_tables::lookup(tables_, rows_, ids, shard_);
      for (size_t f = 0; f < tables_.size(); ++f)
        vectors.push_back(std::get<0>(at::embedding_bag(looked_up.rows[f], looked_up.inverse[f],
                                                        batch.features[f].offsets, false, mode, /*sparse=*/false, {},
                                                        /*include_last_offset=*/true)));
    }
    for (size_t f = 0; f < tables_.size() && !shard_.split(); ++f) {
      const auto& bag = batch.features[f];
      // sparse = true: the table's gradient names only the rows used.
      vectors.push_back(std::get<0>(at::embedding_bag(tables_[f], bag.ids, bag.offsets, /*scale_grad_by_freq=*/false,
                                                      mode, /*sparse=*/true, /*per_sample_weights=*/{},
                                                      /*include_last_offset=*/true)));
    }
    const at::Tensor t = at::stack(vectors, 1);                        // [B, F + 1, E]
    const at::Tensor dots = at::bmm(t, t.transpose(1, 2));             // [B, F + 1, F + 1]
    const at::Tensor pairs = dots.index({at::indexing::Slice(), lower_i_, lower_j_});  // [B, (F + 1) F / 2]
    return run_mlp(top_, at::cat({x, pairs}, 1), /*last_relu=*/false).reshape({-1});
  }

  int64_t dense_, embedding_dim_;
  loom::sparse_tables::Group shard_;  // the ranks splitting the tables by rows (one: whole tables)
  bool mean_pooling_ = false;
  std::vector<int64_t> rows_;
  std::vector<at::Tensor> tables_;
  std::vector<Linear> bottom_, top_;
  at::Tensor lower_i_, lower_j_;
};

}  // namespace

LOOM_PLUGIN("dlrm", "0.1.0", loom::component<Dlrm>())
