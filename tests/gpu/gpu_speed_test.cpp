// gpu_speed_test.cpp: the options that make the host faster on a GPU (issue 51) give the losses
// of the host without them; part of gpu_tests (its main() in gpu_test.cpp skips without a GPU),
// ctest entry gpu_speed_tests. Neither has run on a GPU yet.
//   - model option cuda_kernels = "loom" (ops/' CUDA kernels on the models' path): gpt and a
//     Qwen3-shaped llama give LibTorch's losses in fp32 and bf16 autocast
//   - run.cuda_graph: micro-batches replayed as CUDA graphs give the eager steps' losses to the
//     bit under run.deterministic, gpt and a Qwen3-shaped llama, fp32 and bf16, grad_accum 2
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <cmath>
#include <filesystem>
#include <string>

#include "gpu_runs.hpp"

namespace fs = std::filesystem;
using loom_gpu_test::kGptTiny;
using loom_gpu_test::train;
using loom_test::run_host;

TEST_CASE("cuda_kernels = \"loom\": Loom's kernels give LibTorch's losses, gpt and a Qwen3-shaped llama") {
  const fs::path dir = loom_test::tmp_dir("gpu-kernels");
  const std::string& llama = loom_gpu_test::kLlamaTiny;
  for (const std::string& manifest : {kGptTiny, llama})
    for (const std::string precision : {"fp32", "bf16"}) {
      CAPTURE(manifest);
      CAPTURE(precision);
      const std::string sets = "--set run.device=\"cuda\" --set run.steps=20 --set run.log_every=1 "
                               "--set run.precision=\"" + precision + "\" " +
                               (manifest == llama ? "--set model.qk_norm=true " : "") + "--set model.cuda_kernels=";
      const std::string name = fs::path(manifest).stem().string() + "-" + precision;
      const auto aten = train(manifest, name + "-aten", sets + "\"aten\"", dir);
      const auto loom = train(manifest, name + "-loom", sets + "\"loom\"", dir);
      REQUIRE(aten.size() == loom.size());
      REQUIRE(aten.size() == 20);
      // fp32: other summation orders only; bf16: the kernels round where LibTorch's ops do, but
      // a product's bf16 output differs in its last bit now and then, and 20 steps carry it on.
      const double tolerance = precision == "fp32" ? 1e-4 : 2e-2;
      for (size_t i = 0; i < aten.size(); ++i)
        CHECK_MESSAGE(std::abs(aten[i] - loom[i]) < tolerance * std::abs(aten[i]), "step " << i + 1);
      CHECK(loom.back() < loom.front());
    }
}

// run.cuda_graph: with run.deterministic the graphs run the eager steps' kernels on the same
// values, so the losses must be equal, not close; grad_accum 2 captures both positions (the
// first micro-batch writes the gradients over, the second adds).
TEST_CASE("run.cuda_graph: replayed micro-batches give the eager steps' losses, gpt and a Qwen3-shaped llama") {
  const fs::path dir = loom_test::tmp_dir("gpu-graphs");
  const std::string& llama = loom_gpu_test::kLlamaTiny;
  for (const std::string& manifest : {kGptTiny, llama})
    for (const std::string precision : {"fp32", "bf16"}) {
      CAPTURE(manifest);
      CAPTURE(precision);
      const std::string name = fs::path(manifest).stem().string() + "-" + precision;
      const std::string sets = "--set run.device=\"cuda\" --set run.steps=12 --set run.log_every=1 "
                               "--set run.grad_accum=2 --set run.deterministic=true --set run.precision=\"" +
                               precision + "\" " + (manifest == llama ? "--set model.qk_norm=true " : "");
      const auto eager = train(manifest, name + "-eager", sets, dir);
      const auto r = run_host("run " + manifest + " --set run.dir=\"" + dir.string() + "\" --set run.name=" + name +
                              "-graph " + sets + "--set run.cuda_graph=true");
      REQUIRE_MESSAGE(r.code == 0, r.err);
      CHECK_MESSAGE(loom_test::contains(r.err, "captured the first micro-batch's forward and backward at step 2"), r.err);
      CHECK_MESSAGE(loom_test::contains(r.err, "captured the later micro-batch's forward and backward at step 2"), r.err);
      CHECK_MESSAGE(!loom_test::contains(r.err, "the steps run without graphs"), r.err);
      const auto graphed = loom_test::logged_losses(dir / (name + "-graph"));
      REQUIRE(eager.size() == 12);
      REQUIRE(graphed.size() == eager.size());
      for (size_t i = 0; i < eager.size(); ++i) CHECK_MESSAGE(graphed[i] == eager[i], "step " << i + 1);
    }
}
