// configs/gpt-tiny.toml through the real host binary: a short run exits 0 and its loss falls,
// for the gpt component and, swapped in from the command line, for llama.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <vector>

#include "logged_losses.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;

namespace {

// Runs configs/gpt-tiny.toml with overrides; returns the logged losses.
std::vector<double> run_gpt_tiny(const std::string& name, const std::string& sets) {
  return loom_test::train_losses(std::string(LOOM_SOURCE_DIR) + "/configs/gpt-tiny.toml",
                                 loom_test::tmp_dir("models-" + name), name, sets);
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

TEST_CASE("precision bf16 trains under autocast with fp32 master weights (on the CPU here)") {
  const std::string short_run = "--set run.device=\"cpu\" --set run.steps=30 --set run.log_every=10 ";
  const auto fp32 = run_gpt_tiny("precision-fp32", short_run + "--set run.precision=\"fp32\"");
  const auto bf16 = run_gpt_tiny("precision-bf16", short_run + "--set run.precision=\"bf16\"");
  REQUIRE(bf16.size() == 3);
  CHECK(bf16.back() < 0.8 * bf16.front());
  // Autocast really ran: bf16 matmuls round differently, so the losses are close, not equal.
  CHECK(bf16.front() != fp32.front());
  CHECK(std::abs(bf16.front() - fp32.front()) < 0.05 * fp32.front());
  // The weights the optimizer keeps, and the checkpoint holds, stay fp32.
  const fs::path ckpt_dir = loom_test::tmp_dir("models-precision-ckpt");
  const auto r = loom_test::run_host("run " + std::string(LOOM_SOURCE_DIR) + "/configs/gpt-tiny.toml --set run.dir=\"" +
                                     ckpt_dir.string() + "\" --set run.name=r " + short_run +
                                     "--set run.precision=\"bf16\" --set checkpoint.use=\"safetensors\"");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto inspect = loom_test::run_host("checkpoint inspect " + (ckpt_dir / "r" / "checkpoints" / "step-30").string() +
                                           " --json");
  REQUIRE_MESSAGE(inspect.code == 0, inspect.err);
  const auto tensors = nlohmann::json::parse(inspect.out).at("tensors");
  int model_tensors = 0;
  for (const auto& t : tensors) {
    const std::string name = t.at("name");
    if (name.rfind("model/", 0) != 0) continue;
    ++model_tensors;
    CHECK_MESSAGE(t.at("dtype") == "Float", name);
  }
  CHECK(model_tensors > 10);
}
