// The sparse optimizers (plugins/optimizers/sparse_rows), loaded as the host loads them, step
// through a sequence of row-sparse gradients; sparse_reference.py then replays the same
// gradients through independent PyTorch code (torch.optim.SparseAdam for lazy_adam, the
// published row-wise Adagrad rule written densely for rowwise_adagrad) and compares. Rows no
// step touched must stay bit-identical.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>

#include "plugin_slots.hpp"
#include "python_torch.hpp"
#include "run_host.hpp"
#include "tensor_json.hpp"
#include "abi/compute_components.hpp"
#include "train/sparse_table_updates.hpp"

namespace {

using loom_test::to_json;

struct Steps {
  std::vector<std::vector<loom::OptimizerInstance::SparseGrad>> grads;
  std::vector<double> lrs;
};

// Six steps over two tables: rows drawn at random (some rows repeat across steps, some are
// never touched), values of mixed scale; table 1 is left out of step 3 entirely.
Steps make_steps(const std::vector<at::Tensor>& tables) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  Steps s;
  for (int step = 0; step < 6; ++step) {
    std::vector<loom::OptimizerInstance::SparseGrad> grads;
    for (size_t t = 0; t < tables.size(); ++t) {
      if (t == 1 && step == 3) continue;
      const int64_t rows = tables[t].size(0);
      const at::Tensor pick = at::randperm(rows - 5, gen, at::kLong).narrow(0, 0, 7);  // the last 5 rows: never
      const at::Tensor sorted = std::get<0>(pick.sort());
      grads.push_back({t, sorted, at::randn({7, tables[t].size(1)}, gen) * (0.1 + step)});
    }
    s.grads.push_back(grads);
    s.lrs.push_back(0.05 / (1 + step));
  }
  return s;
}

void check_against_reference(const std::string& optimizer, const toml::table& options) {
  std::vector<at::Tensor> tables = {at::randn({40, 4}), at::randn({25, 3})};
  for (auto& t : tables) t.requires_grad_(true);
  std::vector<at::Tensor> initial;
  for (auto& t : tables) initial.push_back(t.detach().clone());
  std::vector<loom::ModelParam> params;
  for (size_t t = 0; t < tables.size(); ++t)
    params.push_back({"tables." + std::to_string(t) + ".weight", &tables[t], LOOM_PARAM_FLAG_SPARSE_ROWS});
  loom::SparseTables sparse(params, "test");
  const loom::RunContext run{LOOM_TEST_TMP, "cpu", 0, 0, 1, 1};
  loom::OptimizerInstance opt(loom_test::plugin_slot(LOOM_KIND_OPTIMIZER, "sparse_optimizer", optimizer, options), run,
                              sparse.abi());
  REQUIRE(opt.has_sparse_step());
  const Steps steps = make_steps(tables);
  nlohmann::json record = {{"optimizer", optimizer}, {"steps", nlohmann::json::array()}};
  for (auto& [key, value] : options) record["options"][std::string(key.str())] = value.value<double>().value_or(0);
  for (const auto& t : initial) record["initial"].push_back(to_json(t));
  for (size_t i = 0; i < steps.grads.size(); ++i) {
    opt.sparse_step(steps.lrs[i], static_cast<int64_t>(i + 1), steps.grads[i]);
    nlohmann::json step = {{"lr", steps.lrs[i]}, {"grads", nlohmann::json::array()}};
    for (const auto& g : steps.grads[i])
      step["grads"].push_back({{"table", g.table}, {"rows", to_json(g.rows)}, {"values", to_json(g.values)}});
    record["steps"].push_back(step);
  }
  for (const auto& t : tables) record["final"].push_back(to_json(t.detach()));
  for (const auto& st : opt.state()) record["state"][st.name] = to_json(*st.tensor);

  // Never-touched rows (the last 5 of each table) are bit-identical, without any reference.
  for (size_t t = 0; t < tables.size(); ++t) {
    const int64_t rows = tables[t].size(0);
    CHECK(at::equal(tables[t].detach().narrow(0, rows - 5, 5), initial[t].narrow(0, rows - 5, 5)));
    CHECK_FALSE(at::equal(tables[t].detach(), initial[t]));
  }
  const std::string path = std::string(LOOM_TEST_TMP) + "/sparse-" + optimizer + ".json";
  std::ofstream(path) << record.dump();
  std::string tried;
  const std::string python = loom_test::python_with_torch(tried);
  REQUIRE_MESSAGE(!python.empty(), "no python3 with torch among " << tried);
  const auto r = loom_test::run_shell(python + " " + LOOM_RECSYS_DIR + "/sparse_reference.py " + path);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  MESSAGE(r.out);
}

}  // namespace

TEST_CASE("lazy_adam equals torch.optim.SparseAdam on touched rows and leaves the others bit-identical") {
  check_against_reference("lazy_adam", toml::table{{"beta1", 0.8}, {"beta2", 0.95}, {"eps", 1e-6}});
}

TEST_CASE("rowwise_adagrad equals the row-wise Adagrad rule on touched rows and leaves the others bit-identical") {
  check_against_reference("rowwise_adagrad", toml::table{{"eps", 1e-6}, {"initial_accumulator", 0.1}});
}

TEST_CASE("a sparse optimizer named in [optimizer] is refused at creation") {
  at::Tensor flat = at::zeros({4});
  const loom::RunContext run{LOOM_TEST_TMP, "cpu", 0, 0, 1, 1};
  loom_param_groups none{};
  none.struct_size = sizeof(none);
  try {
    loom::OptimizerInstance opt(loom_test::plugin_slot(LOOM_KIND_OPTIMIZER, "optimizer", "lazy_adam"), run, none);
    FAIL("created");
  } catch (const loom::Failure& f) {
    CHECK(std::string(f.what()).find("name it in [sparse_optimizer]") != std::string::npos);
  }
}
