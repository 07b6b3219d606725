// configs/gpt-tiny.toml through the real host binary: a short run exits 0 and its loss falls,
// for the gpt component and, swapped in from the command line, for llama.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <vector>

#include "run_host.hpp"

namespace fs = std::filesystem;

namespace {

// Runs configs/gpt-tiny.toml with overrides; returns the logged losses.
std::vector<double> run_gpt_tiny(const std::string& name, const std::string& sets) {
  const fs::path dir = loom_test::tmp_dir("models-" + name);
  const auto r = loom_test::run_host("run " + std::string(LOOM_SOURCE_DIR) + "/configs/gpt-tiny.toml --set run.dir=\"" +
                                     dir.string() + "\" --set run.name=" + name + " " + sets);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::vector<double> losses;
  std::istringstream lines(loom_test::read_file(dir / name / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) losses.push_back(nlohmann::json::parse(line).at("loss"));
  return losses;
}

}  // namespace

TEST_CASE("configs/gpt-tiny.toml trains a gpt with falling loss") {
  const auto losses = run_gpt_tiny("gpt-tiny", "--set run.steps=60 --set run.log_every=10");
  REQUIRE(losses.size() == 6);
  CHECK(losses.front() > 4.0);  // near ln(256) = 5.55 over the first ten steps
  CHECK(losses.back() < 0.6 * losses.front());
}

TEST_CASE("the same manifest trains the llama component with falling loss") {
  const auto losses = run_gpt_tiny("llama-tiny", "--set model.use=\"llama\" --set run.steps=60 --set run.log_every=10");
  REQUIRE(losses.size() == 6);
  CHECK(losses.back() < 0.6 * losses.front());
}
