// batch_fields_test.cpp: named batch fields (ABI 1.2) through the real host. The fields_data
// dataset adds five fields of four dtypes and three ranks; the fields_model model records what
// its first forward received. The expected values repeat fields_data's formula, so this
// checks the whole path (dataset, add_field, prefetcher, model forward) from outside.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// metrics.jsonl as one JSON object per logged step.
std::vector<nlohmann::json> logged(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(loom_test::read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// fields_data's inputs of batch k: (16k + j) % 64 for j = 0..7.
std::vector<double> inputs_of_batch(int64_t k) {
  std::vector<double> out;
  for (int64_t j = 0; j < 8; ++j) out.push_back(static_cast<double>((16 * k + j) % 64));
  return out;
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

TEST_CASE("datasets built against the frozen ABI 1.0 and 1.1 headers still load and train") {
  const fs::path dir = write_manifest("abi11", "use = \"fields_model\"\nposition_dtype = \"int64\"",
                                      "use = \"abi11_data\"");
  const auto r = run_host("run " + (dir / "m.toml").string());
  // fields_model demands position_ids, which a 1.1 dataset cannot give: the run fails at the
  // model, naming the field, and not inside the host.
  CHECK(r.code == 1);
  CHECK(contains(r.err, "batch field \"position_ids\" is missing"));
  check_trains(write_manifest("abi11-plain", kInputsOnlyModel, "use = \"abi11_data\""));
  check_trains(write_manifest("abi10-plain", kInputsOnlyModel, "use = \"abi10_data\""));
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
  CHECK(contains(r.err, "batch field \"position_ids\": expected Float of rank 2, got Long of rank 2 (the batch came "
                        "from [data] fields_data)"));
}

TEST_CASE("model-reported metrics reach trackers, reduced over micro-batches by their reduction") {
  const fs::path dir = write_manifest("metrics", "use = \"fields_model\"", "use = \"fields_data\"", 2);
  const auto r = run_host("run " + (dir / "m.toml").string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto steps = logged(dir / "t");
  REQUIRE(steps.size() == 3);
  for (int64_t n = 1; n <= 3; ++n) {  // step n trains on batches 2(n-1) and 2(n-1)+1
    CAPTURE(n);
    std::vector<double> inputs = inputs_of_batch(2 * (n - 1)), second = inputs_of_batch(2 * (n - 1) + 1);
    inputs.insert(inputs.end(), second.begin(), second.end());
    double sum = 0;
    for (double v : inputs) sum += v;
    const nlohmann::json& m = steps[static_cast<size_t>(n - 1)];
    CHECK(m.at("inputs_mean").get<double>() == doctest::Approx(sum / 16).epsilon(1e-12));
    CHECK(m.at("micro_batches").get<double>() == 2.0);
    CHECK(m.at("inputs_max").get<double>() == *std::max_element(inputs.begin(), inputs.end()));
  }
}

TEST_CASE("a model that counts its own units: the loss and gradients are divided by them") {
  const fs::path tokens = write_manifest("units-tokens", "use = \"fields_model\"", "use = \"fields_data\"", 2);
  const fs::path samples =
      write_manifest("units-samples", "use = \"fields_model\"\nunits = \"samples\"", "use = \"fields_data\"", 2);
  for (const fs::path& dir : {tokens, samples}) REQUIRE(run_host("run " + (dir / "m.toml").string()).code == 0);
  // The bigram table starts at zero: every one of the 2 x 8 label tokens costs ln 64. Divided
  // by 16 tokens that is ln 64; by 4 rows (2 per micro-batch), 4 ln 64, and every gradient 4x.
  const auto by_tokens = logged(tokens / "t"), by_samples = logged(samples / "t");
  CHECK(by_tokens[0].at("loss").get<double>() == doctest::Approx(std::log(64.0)).epsilon(1e-6));
  CHECK(by_samples[0].at("loss").get<double>() == doctest::Approx(4 * std::log(64.0)).epsilon(1e-6));
  CHECK(by_samples[0].at("grad_norm").get<double>() ==
        doctest::Approx(4 * by_tokens[0].at("grad_norm").get<double>()).epsilon(1e-6));
}

TEST_CASE("two ranks: metrics and units reduce across them") {
  // Both ranks draw the same batches (fields_data ignores the rank), so a sum doubles and a
  // mean, a max, the loss per unit and the gradient stay what one rank computes.
  const fs::path one =
      write_manifest("ranks-one", "use = \"fields_model\"\nunits = \"samples\"", "use = \"fields_data\"", 2);
  const fs::path two =
      write_manifest("ranks-two", "use = \"fields_model\"\nunits = \"samples\"", "use = \"fields_data\"", 2);
  REQUIRE(run_host("run " + (one / "m.toml").string()).code == 0);
  const auto r = run_host("launch --nproc-per-node 2 -- run " + (two / "m.toml").string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto single = logged(one / "t"), pair = logged(two / "t");
  REQUIRE(pair.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(pair[i].at("micro_batches").get<double>() == 4.0);
    for (const char* same : {"inputs_mean", "inputs_max", "loss", "grad_norm"})
      CHECK_MESSAGE(pair[i].at(same).get<double>() == doctest::Approx(single[i].at(same).get<double>()).epsilon(1e-6),
                    same);
  }
}

TEST_CASE("host eval: a checkpoint's model on [eval_data], with the model's metrics, as training evaluated it") {
  const fs::path dir = write_manifest("eval", "use = \"fields_model\"", "use = \"fields_data\"");
  std::ofstream(dir / "m.toml", std::ios::app) << "[eval_data]\nuse = \"fields_data\"\nmax_batches = 2\n"
                                                  "[[hooks]]\nuse = \"eval\"\nevery = 3\n"
                                                  "[checkpoint]\nevery = 3\n";
  const auto trained = run_host("run " + (dir / "m.toml").string());
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  const auto r = run_host("eval " + (dir / "m.toml").string() + " --json");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const nlohmann::json e = nlohmann::json::parse(r.out);
  CHECK(e.at("step") == 3);
  CHECK(e.at("checkpoint").get<std::string>() == (dir / "t" / "checkpoints" / "step-3").string());
  const nlohmann::json& m = e.at("metrics");
  // Eval batches 0 and 1 of fields_data: inputs 0..7 and 16..23.
  CHECK(m.at("eval_inputs_mean").get<double>() == doctest::Approx(11.5));
  CHECK(m.at("eval_inputs_max").get<double>() == 23.0);
  CHECK(m.at("eval_micro_batches").get<double>() == 2.0);
  CHECK(m.at("eval_tokens").get<double>() == 16.0);
  // The run's own evaluation after step 3 saw the same weights and the same batches.
  const auto steps = logged(dir / "t");
  REQUIRE(steps.size() == 3);
  CHECK(m.at("eval_loss").get<double>() == doctest::Approx(steps[2].at("eval_loss").get<double>()).epsilon(1e-9));
  CHECK(steps[2].at("eval_inputs_mean").get<double>() == doctest::Approx(11.5));

  const auto text = run_host("eval " + (dir / "m.toml").string() + " --checkpoint " +
                             (dir / "t" / "checkpoints" / "step-3").string());
  CHECK(text.code == 0);
  CHECK(contains(text.out, "eval_loss"));
  const fs::path bare = write_manifest("eval-none", "use = \"fields_model\"", "use = \"fields_data\"");
  const auto none = run_host("eval " + (bare / "m.toml").string());
  CHECK(none.code == 2);
  CHECK(contains(none.err, "error: host eval: the manifest has no [eval_data] table"));
}
