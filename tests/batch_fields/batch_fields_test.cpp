// batch_fields_test.cpp: named batch fields (ABI 1.2) through the real host. The fields_data
// dataset adds five fields of four dtypes and three ranks; the fields_model model records what
// its first forward received. The expected values repeat fields_data's formula, so this
// checks the whole path (dataset, add_field, prefetcher, model forward) from outside.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::contains;
using loom_test::run_host;

namespace {

// A 3-step run of `model` on `data` (given as TOML table bodies), plugins from test-plugins.
fs::path write_manifest(const std::string& name, const std::string& model, const std::string& data,
                        int grad_accum = 1) {
  const fs::path dir = loom_test::tmp_dir("batch-fields-" + name);
  std::ofstream(dir / "m.toml") << "[run]\nname = \"t\"\ndir = \"" << dir.string()
                                << "\"\nsteps = 3\nlog_every = 1\nthreads = 1\npeak_flops = 1e9\ngrad_accum = "
                                << grad_accum << "\n[plugins]\npaths = [\"" << LOOM_TEST_PLUGIN_DIR
                                << "/batch_fields\"]\n[model]\n" << model << "\n[data]\n" << data
                                << "\n[optimizer]\nuse = \"sgd\"\nlr = 0.1\n[[trackers]]\nuse = \"jsonl\"\n";
  return dir;
}

// mlp_lm reads only inputs and targets (it overrides loss_sum(inputs, targets) alone).
const std::string kInputsOnlyModel = "use = \"mlp_lm\"\nvocab_size = 64\nn_embd = 8\ncontext = 2\nhidden = 16";

// Runs the manifest in dir and checks that all three steps were logged.
void check_trains(const fs::path& dir) {
  const auto r = run_host("run " + (dir / "m.toml").string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(contains(loom_test::read_file(dir / "t" / "metrics.jsonl"), "\"step\":3"));
}

struct Expected {
  const char* name;
  const char* dtype;
  std::vector<int64_t> shape;
  double sum;
};

}  // namespace

TEST_CASE("every field reaches the model with its name, order, dtype, shape and values") {
  const fs::path dir = write_manifest("intact", "use = \"fields_model\"", "use = \"fields_data\"", 2);
  const auto r = run_host("run " + (dir / "m.toml").string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const nlohmann::json got = nlohmann::json::parse(loom_test::read_file(dir / "t" / "fields.json"));
  // Batch 0 of fields_data: inputs 0..7, targets 1..8, positions 0..3 twice, weights 0.25 and
  // 0.5 four times each, span_values 0, 1, 2, span_offsets 0, 1, 3, row_flags 1, 2.
  const std::vector<Expected> expected = {
      {"input_ids", "Long", {2, 4}, 28}, {"labels", "Long", {2, 4}, 36},
      {"position_ids", "Long", {2, 4}, 12}, {"loss_weight", "Float", {2, 4}, 3},
      {"span_values", "Int", {3}, 3},      {"span_offsets", "Long", {3}, 4},
      {"row_flags", "Byte", {2}, 3}};
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(got[i].dump());
    CHECK(got[i].at("name") == expected[i].name);
    CHECK(got[i].at("dtype") == expected[i].dtype);
    CHECK(got[i].at("device") == "cpu");
    CHECK(got[i].at("shape").get<std::vector<int64_t>>() == expected[i].shape);
    CHECK(got[i].at("sum").get<double>() == doctest::Approx(expected[i].sum));
  }
}

TEST_CASE("a model that reads only inputs and targets trains on a dataset with extra fields") {
  check_trains(write_manifest("old-model", kInputsOnlyModel, "use = \"fields_data\""));
}

TEST_CASE("a dataset built against the frozen ABI 1.1 headers still loads and trains") {
  const fs::path dir = write_manifest("abi11", "use = \"fields_model\"\nposition_dtype = \"int64\"",
                                      "use = \"abi11_data\"");
  const auto r = run_host("run " + (dir / "m.toml").string());
  // fields_model demands position_ids, which a 1.1 dataset cannot give: the run fails at the
  // model, naming the field, and not inside the host.
  CHECK(r.code == 1);
  CHECK(contains(r.err, "batch field \"position_ids\" is missing"));
  check_trains(write_manifest("abi11-plain", kInputsOnlyModel, "use = \"abi11_data\""));
}

TEST_CASE("bad fields are one line naming the dataset or model, the field, expected and actual") {
  const fs::path bad_name = write_manifest("bad-name", "use = \"fields_model\"", "use = \"fields_data\"\nbad_name = true");
  auto r = run_host("run " + (bad_name / "m.toml").string());
  CHECK(r.code == 1);
  CHECK(loom_test::line_count(r.err.substr(r.err.find("error: "))) == 1);
  CHECK(contains(r.err, "error: [data] fields_data"));
  CHECK(contains(r.err, "batch field \"Bad-Name\" is not a lower_snake_case name"));
  const fs::path bad_dtype = write_manifest("bad-dtype", "use = \"fields_model\"\nposition_dtype = \"float32\"",
                                            "use = \"fields_data\"");
  r = run_host("run " + (bad_dtype / "m.toml").string());
  CHECK(r.code == 1);
  CHECK(contains(r.err, "error: [model] fields_model"));
  CHECK(contains(r.err, "batch field \"position_ids\": expected Float of rank 2, got Long of rank 2"));
}
