// The dlrm model plugin (plugins/models/dlrm), loaded as the host loads it, runs forward and
// backward on a small batch with ragged bags; dlrm_reference.py then recomputes the loss, the
// metrics and every gradient from the paper's definition with independent PyTorch code and
// compares. Also: a batch the tables cannot serve fails with one clear line.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "../models/model_harness.hpp"  // make_model, randomize: the model tests' own
#include "python_torch.hpp"
#include "run_host.hpp"
#include "tensor_json.hpp"

namespace {

using loom_test::to_json;

constexpr int64_t kDense = 3, kSparse = 4, kDim = 4;
const std::vector<int64_t> kRows = {50, 40, 30, 20};

toml::table dlrm_options(const std::string& pooling) {
  return toml::table{{"dense_features", kDense}, {"sparse_features", kSparse}, {"table_rows", "50,40,30,20"},
                     {"embedding_dim", kDim},    {"bottom_mlp", "5"},          {"top_mlp", "6"},
                     {"pooling", pooling}};
}

// bags[f][b]: the ids of feature f in sample b. Returns {values, offsets} in the dataset's
// feature-major CSR layout.
std::pair<at::Tensor, at::Tensor> csr(const std::vector<std::vector<std::vector<int64_t>>>& bags) {
  std::vector<int64_t> values, offsets{0};
  for (const auto& feature : bags)
    for (const auto& bag : feature) {
      values.insert(values.end(), bag.begin(), bag.end());
      offsets.push_back(static_cast<int64_t>(values.size()));
    }
  return {at::tensor(values, at::kLong), at::tensor(offsets, at::kLong)};
}

struct CtrBatch {
  at::Tensor inputs, targets;
  loom::BatchFields fields;
};

// Five samples. Bags of 0 to 3 ids, an id repeated inside one bag (its row's gradient counts
// twice), rows shared across samples, and each table's first and last row.
CtrBatch make_batch() {
  const std::vector<std::vector<std::vector<int64_t>>> bags = {
      {{3}, {7, 49, 7}, {0}, {12}, {3, 20}},
      {{39}, {5}, {}, {5, 6}, {0}},
      {{29}, {1, 2, 3}, {14}, {29}, {8}},
      {{0}, {19}, {11, 4}, {}, {19}},
  };
  const auto [values, offsets] = csr(bags);
  const int64_t B = 5;
  CtrBatch b;
  b.inputs = at::arange(B, at::kLong).reshape({B, 1});
  b.targets = at::tensor(std::vector<int64_t>{1, 0, 0, 1, 1}, at::kLong).reshape({B, 1});
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  b.fields = {{"dense_features", at::rand({B, kDense}, gen) * 3.0},
              {"sparse_ids_values", values},
              {"sparse_ids_offsets", offsets}};
  return b;
}

void check_against_reference(const std::string& pooling) {
  auto model = loom_test::make_model("dlrm", dlrm_options(pooling));
  loom_test::randomize(*model, 23);
  const CtrBatch batch = make_batch();
  const loom::ForwardResult r = model->forward(batch.inputs, batch.targets, batch.fields);
  r.loss_sum.backward();

  nlohmann::json rec = {{"pooling", pooling},
                        {"dense_features", kDense},
                        {"table_rows", kRows},
                        {"embedding_dim", kDim},
                        {"bottom_mlp", {5}},
                        {"top_mlp", {6}},
                        {"loss_sum", r.loss_sum.item<double>()},
                        {"labels", to_json(batch.targets)}};
  for (const auto& [name, t] : batch.fields) rec["batch"][name] = to_json(t);
  REQUIRE(r.units.defined());
  CHECK(r.units.item<double>() == 5.0);  // the loss is per sample, so its units are samples
  std::vector<std::string> reported;
  for (const loom::ReportedMetric& m : r.metrics) {
    rec["metrics"][m.name] = to_json(m.value);
    reported.push_back(m.name);
    if (m.name == "logloss") CHECK((m.reduction == LOOM_METRIC_REDUCTION_MEAN && m.value.numel() == 1));
    if (m.name == "auc")  // rows of (score, label) for the host's exact AUC
      CHECK((m.reduction == LOOM_METRIC_REDUCTION_ROC_AUC && m.value.sizes() == at::IntArrayRef{5, 2}));
  }
  CHECK(reported == std::vector<std::string>{"logloss", "auc"});
  for (const loom::ModelParam& p : model->params()) {
    const at::Tensor& g = p.tensor->grad();
    REQUIRE_MESSAGE(g.defined(), p.name << " has no gradient");
    rec["params"][p.name] = to_json(*p.tensor);
    const bool table = (p.flags & LOOM_PARAM_FLAG_SPARSE_ROWS) != 0;
    CHECK_MESSAGE(table == (p.name.rfind("tables.", 0) == 0), p.name);
    if (table) {
      // Sparse tables must get sparse gradients: only the looked-up rows may appear.
      REQUIRE_MESSAGE(g.is_sparse(), p.name << "'s gradient is dense");
      const at::Tensor c = g.coalesce();
      rec["grads"][p.name] = {{"rows", to_json(c.indices()[0])}, {"values", to_json(c.values())}};
    } else {
      rec["grads"][p.name] = {{"dense", to_json(g)}};
    }
  }
  const std::string path = std::string(LOOM_TEST_TMP) + "/dlrm-" + pooling + ".json";
  std::ofstream(path) << rec.dump();
  std::string tried;
  const std::string python = loom_test::python_with_torch(tried);
  REQUIRE_MESSAGE(!python.empty(), "no python3 with torch among " << tried);
  const auto out = loom_test::run_shell(python + " " + LOOM_RECSYS_DIR + "/dlrm_reference.py " + path);
  INFO(out.out << out.err);
  CHECK(out.code == 0);
  MESSAGE(out.out);
}

// What forward throws for the batch with field `name` replaced by `value`.
std::string forward_error(loom::ModelInstance& model, const std::string& name, const at::Tensor& value) {
  CtrBatch b = make_batch();
  for (auto& [n, t] : b.fields)
    if (n == name) t = value;
  return loom_test::failure_message([&] { model.forward(b.inputs, b.targets, b.fields); });
}

}  // namespace

TEST_CASE("dlrm with sum pooling: loss, metrics and every gradient equal an independent DLRM in PyTorch") {
  check_against_reference("sum");
}

TEST_CASE("dlrm with mean pooling: loss, metrics and every gradient equal an independent DLRM in PyTorch") {
  check_against_reference("mean");
}

TEST_CASE("dlrm refuses a batch its tables cannot serve, in one line naming the cause") {
  auto model = loom_test::make_model("dlrm", dlrm_options("sum"));
  const at::Tensor values = make_batch().fields[1].second;
  const at::Tensor offsets = make_batch().fields[2].second;
  const auto one_line = [](const std::string& m) { return !m.empty() && m.find('\n') == std::string::npos; };

  // Feature 2's table has 30 rows; its first id becomes 30.
  at::Tensor too_big = values.clone();
  too_big[offsets[2 * 5].item<int64_t>()] = 30;
  std::string m = forward_error(*model, "sparse_ids_values", too_big);
  CHECK_MESSAGE(one_line(m), m);
  CHECK_MESSAGE(loom_test::contains(m, "sparse feature 2 holds id 30, outside its table's 30 rows"), m);
  CHECK_MESSAGE(loom_test::contains(m, "table_rows"), m);

  at::Tensor negative = values.clone();
  negative[0] = -1;
  m = forward_error(*model, "sparse_ids_values", negative);
  CHECK_MESSAGE(loom_test::contains(m, "sparse feature 0 holds id -1"), m);

  // sparse_features x B + 1 = 21 entries; one short.
  m = forward_error(*model, "sparse_ids_offsets", offsets.narrow(0, 0, 20));
  CHECK_MESSAGE(one_line(m), m);
  CHECK_MESSAGE(
      loom_test::contains(m, "\"sparse_ids_offsets\" has 20 entries, expected sparse_features x B + 1 = 21"), m);

  at::Tensor decreasing = offsets.clone();
  decreasing[3] = 0;
  m = forward_error(*model, "sparse_ids_offsets", decreasing);
  CHECK_MESSAGE(loom_test::contains(m, "\"sparse_ids_offsets\" decreases at entry 3"), m);

  m = forward_error(*model, "dense_features", at::zeros({5, kDense + 1}));
  CHECK_MESSAGE(loom_test::contains(m, "\"dense_features\" is [5, 4], expected [5, 3]"), m);
}
