// gpu_layouts_test.cpp: every parallel layout with 2 ranks sharing one GPU over Gloo (NCCL
// refuses two ranks on a device), each against the run its CPU test compares it with (issue 52);
// part of gpu_tests (its main() in gpu_test.cpp skips without a GPU), ctest entry
// gpu_layouts_tests. None of these has run on a GPU yet.
//   - two pipeline stages train as one GPU process
//   - data parallelism, ZeRO-1, 2 and 3 (with offload too), tensor and sequence parallelism give
//     one GPU process's losses
//   - shard = "parameters" starts sliced, maps about half the weights and gradients on each rank
//     (CUDA virtual memory) and trains as ZeRO-2 does
//   - optimizer offload: one GPU process's losses with the update on the CPU, alone and with
//     ZeRO-1, whole and piece by piece; a model whose AdamW state breaks a cap trains under it
//     offloaded
//   - expert parallelism and a context-parallel ring against one process, row-sharded tables
//     against replicated ones
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <filesystem>
#include <fstream>
#include <string>

#include "gpu_runs.hpp"
#include "mesh_runs.hpp"
#include "moe_folder.hpp"

namespace fs = std::filesystem;
using loom_gpu_test::kGptTiny;
using loom_gpu_test::train;
using loom_mesh_test::Layout;
using loom_mesh_test::Logged;
using loom_test::run_host;

namespace {

// Every rank on the one GPU, talking over Gloo (its CUDA collectives stage through host memory).
const std::string kOnTheGpu = " --set run.device=\"cuda:0\" --set distributed.backend=\"gloo\"";

// The CPU tests' closeness for these layouts, a little wider: the GPU's sums run in other orders
// (atomics in the embedding and index-add backward), not the CPU's fixed ones.
void check_same_losses(const Logged& one, const Logged& other, double tolerance) {
  loom_mesh_test::check_close(one.loss, other.loss, tolerance);
}

}  // namespace

TEST_CASE("two pipeline stages sharing one GPU over Gloo give one GPU process's losses") {
  // Gloo, since NCCL refuses two ranks on one device: the stages' hidden states and gradients
  // travel through host memory (Communicator::start_send/receive), the stages' gradients are
  // summed by Gloo's CUDA all-reduce. 4 micro-batches a step, 1F1B.
  const fs::path dir = loom_test::tmp_dir("gpu-pipeline");
  const std::string sets = " --set run.steps=10 --set run.log_every=1 --set run.precision=\"fp32\" "
                           "--set run.device=\"cuda:0\" --set run.grad_accum=4 --set data.batch_size=4";
  const auto one = train(kGptTiny, "one", sets, dir);
  const auto r = run_host("launch --nproc-per-node 2 -- run " + kGptTiny + " --set run.dir=\"" + dir.string() +
                          "\" --set run.name=p2" + sets +
                          " --set distributed.pipeline_parallel=2 --set distributed.backend=\"gloo\"");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto two = loom_test::logged_losses(dir / "p2");
  REQUIRE(two.size() == one.size());
  for (size_t i = 0; i < one.size(); ++i)  // the same kernels on the same device; the sum adds zeros
    CHECK_MESSAGE(std::abs(two[i] - one[i]) <= 1e-5 * std::abs(one[i]), "step " << i + 1);
}

TEST_CASE("2 ranks sharing one GPU over Gloo give one GPU process's losses: data parallel, ZeRO-1, 2 and 3, tensor and sequence parallel") {
  // Gloo, since NCCL refuses two ranks on one device; deterministic kernels, so that the one
  // process's run is a fixed reference. 16 rows a step in every layout: 8 a data rank, or the
  // same 16 on both ranks of a tensor or sequence group.
  const fs::path dir = loom_test::tmp_dir("gpu-layouts");
  const std::string sets = " --set run.steps=10 --set run.log_every=1 --set run.precision=\"fp32\" "
                           "--set run.device=\"cuda:0\" --set run.deterministic=true";
  const auto one = train(kGptTiny, "one", sets + " --set data.batch_size=16", dir);
  const std::pair<const char*, const char*> layouts[] = {
      {"data", " --set data.batch_size=8"},
      {"zero1", " --set data.batch_size=8 --set distributed.shard=\"optimizer\""},
      {"zero2", " --set data.batch_size=8 --set distributed.shard=\"gradients\""},
      {"zero3", " --set data.batch_size=8 --set distributed.shard=\"parameters\""},
      {"zero1-offload", " --set data.batch_size=8 --set distributed.shard=\"optimizer\" --set distributed.offload=\"optimizer\""},
      {"tensor", " --set data.batch_size=16 --set distributed.tensor_parallel=2"},
      {"sequence", " --set data.batch_size=16 --set distributed.sequence_parallel=2"}};
  for (const auto& [name, layout] : layouts) {
    CAPTURE(name);
    const auto r = run_host("launch --nproc-per-node 2 -- run " + kGptTiny + " --set run.dir=\"" + dir.string() +
                            "\" --set run.name=" + name + sets + layout + " --set distributed.backend=\"gloo\"");
    CHECK_MESSAGE(r.code == 0, r.err);
    if (r.code != 0) continue;
    const auto two = loom_test::logged_losses(dir / name);
    REQUIRE(two.size() == one.size());
    for (size_t i = 0; i < one.size(); ++i)  // the CPU tests' tolerance for the same layouts
      CHECK_MESSAGE(std::abs(two[i] - one[i]) <= 1e-5 * std::abs(one[i]), "step " << i + 1);
  }
}

TEST_CASE("shard = \"parameters\" on the GPU: each of 2 ranks maps about half the weights and gradients, and trains as ZeRO-2 does") {
  // 24 layers of 3.1 M parameters (12.6 MiB each in fp32), 302 MiB of weights and as much of
  // gradients: a rank keeps its half mapped, a few layers' other halves while they run or wait
  // for the GPU to finish with them, and the gradient buckets until they are reduced. The start
  // is sliced (a first build on the CPU learns the layout; the second keeps each parameter's
  // slice as the GPU makes it), so no rank ever maps the whole.
  const fs::path dir = loom_test::tmp_dir("gpu-zero3");
  const std::string sets = " --set run.steps=6 --set run.log_every=1 --set run.precision=\"fp32\" "
                           "--set run.device=\"cuda:0\" --set run.deterministic=true --set data.batch_size=4 "
                           "--set model.n_layer=24 --set model.n_embd=512 --set model.n_head=8 "
                           "--set distributed.backend=\"gloo\"";
  const auto launch = [&](const std::string& name, const std::string& shard) {
    return run_host("launch --nproc-per-node 2 -- run " + kGptTiny + " --set run.dir=\"" + dir.string() +
                    "\" --set run.name=" + name + sets + " --set distributed.shard=\"" + shard + "\"");
  };
  const auto zero2 = launch("zero2", "gradients");
  REQUIRE_MESSAGE(zero2.code == 0, zero2.err);
  const auto zero3 = launch("zero3", "parameters");
  REQUIRE_MESSAGE(zero3.code == 0, zero3.err);
  CHECK_MESSAGE(loom_test::contains(zero3.err, "the model was built as this rank's slice"), zero3.err);
  const auto two = loom_test::logged_losses(dir / "zero2"), three = loom_test::logged_losses(dir / "zero3");
  REQUIRE(three.size() == two.size());
  for (size_t i = 0; i < two.size(); ++i)
    CHECK_MESSAGE(std::abs(three[i] - two[i]) <= 1e-5 * std::abs(two[i]), "step " << i + 1);
  const std::string said = "of weights and gradients were mapped on the GPU at once, of ";
  const size_t at = zero3.err.find(said);
  REQUIRE_MESSAGE(at != std::string::npos, zero3.err);
  const size_t mapped_from = zero3.err.rfind("at most ", at) + 8;
  const double mapped = std::stod(zero3.err.substr(mapped_from)), whole = std::stod(zero3.err.substr(at + said.size()));
  MESSAGE("mapped at most " << mapped << " MiB of " << whole << " MiB");
  CHECK(whole > 580.0);
  CHECK(mapped > 0.45 * whole);
  CHECK(mapped < 0.75 * whole);
}

TEST_CASE("optimizer offload on the GPU: the update on the CPU gives the GPU's losses, and frees a cap") {
  const fs::path dir = loom_test::tmp_dir("gpu-offload");
  const std::string sets = " --set run.steps=10 --set run.log_every=1 --set run.precision=\"fp32\" "
                           "--set run.device=\"cuda:0\" --set run.deterministic=true";
  const auto on_device = train(kGptTiny, "device", sets, dir);
  const auto offloaded = train(kGptTiny, "offloaded", sets + " --set distributed.offload=\"optimizer\"", dir);
  REQUIRE(offloaded.size() == on_device.size());
  for (size_t i = 0; i < on_device.size(); ++i)  // AdamW's CPU and CUDA kernels round apart
    CHECK_MESSAGE(std::abs(offloaded[i] - on_device[i]) <= 1e-5 * std::abs(on_device[i]), "step " << i + 1);
  // In pieces of 16 K floats each piece's copies wait on events between the two side streams
  // and the CPU; the deterministic run must not move by a bit from the one-piece run's.
  const auto pieces = train(kGptTiny, "pieces", sets + " --set distributed.offload=\"optimizer\" "
                                                       "--set distributed.offload_piece_mb=0.0625", dir);
  CHECK(pieces == offloaded);
  // 8 layers 1024 wide: 101 M parameters, 0.38 GiB each of weights and gradients and 0.75 GiB of
  // AdamW's moments. The build holds the model's own weights beside the flat buffers for a while
  // (1.13 GiB); then, under 1.3 GiB, only the offloaded run fits (0.75 GiB and the activations).
  const std::string big = " --set run.steps=2 --set run.device=\"cuda:0\" --set run.precision=\"fp32\" "
                          "--set model.n_layer=8 --set model.n_embd=1024 --set data.batch_size=4 --set run.gpu_memory_gib=1.3";
  const auto fits = run_host("run " + kGptTiny + " --set run.dir=\"" + dir.string() + "\" --set run.name=big-offloaded" +
                             big + " --set distributed.offload=\"optimizer\"");
  CHECK_MESSAGE(fits.code == 0, fits.err);
  CHECK(loom_test::contains(fits.err, "optimizer state 0.0 MiB; offloaded to host memory"));
  // AdamW makes its moments when it is created, so this one runs out while the run is set up.
  const auto breaks = run_host("run " + kGptTiny + " --set run.dir=\"" + dir.string() + "\" --set run.name=big-device" + big);
  CHECK(breaks.code == 1);
  CHECK_MESSAGE(loom_test::contains(breaks.err, "CUDA ran out of memory on cuda:0 while the run was set up"), breaks.err);
  CHECK(loom_test::contains(breaks.err, "move the optimizer to host memory ([distributed] offload = \"optimizer\")"));
}

TEST_CASE("expert parallel 2 on one GPU gives one GPU process's run (a Qwen2-MoE folder transformers wrote)") {
  const fs::path dir = loom_test::tmp_dir("gpu-expert-parallel");
  const fs::path folder = loom_test::moe_folder(dir, "qwen2_moe", /*aux_in_loss=*/false);
  const std::string m = loom_mesh_test::manifest(
      dir, "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" + folder.string() + "\"\nseq_len = 16\n");
  const std::string sets = " --set data.vocab_size=64" + kOnTheGpu;
  const Logged one = loom_mesh_test::train(m, "one", Layout{1}, sets);
  const Logged two = loom_mesh_test::train(m, "e2", Layout{2}, sets + " --set distributed.expert_parallel=2");
  check_same_losses(one, two, 1e-4);
}

TEST_CASE("a context-parallel ring of 2 on one GPU gives one GPU process's run (llama, grouped-query attention)") {
  const fs::path dir = loom_test::tmp_dir("gpu-context-parallel");
  const std::string m = loom_mesh_test::manifest(dir, loom_mesh_test::kLlama);
  const Logged one = loom_mesh_test::train(m, "one", Layout{1}, kOnTheGpu);
  const Logged ring = loom_mesh_test::train(m, "c2", Layout{2, 1, 1, 2}, kOnTheGpu);
  check_same_losses(one, ring, 1e-4);
}

TEST_CASE("row-sharded tables on 2 ranks sharing one GPU train as replicated ones (dlrm)") {
  const fs::path dir = loom_test::tmp_dir("gpu-row-sharded");
  const fs::path data = dir / "ctr-data";
  const auto synth = loom_test::run_shell(std::string(LOOM_CTR_SYNTH_BIN) + " --out " + data.string() +
                                          " --train-files 1 --rows-per-file 30000 --eval-rows 100");
  REQUIRE_MESSAGE(synth.code == 0, synth.err);
  // ctr-synth's model, data and optimizers, with a jsonl tracker (--set cannot add one to an array).
  const fs::path m = dir / "ctr.toml";
  std::ofstream(m) << loom_test::read_file(fs::path(LOOM_SOURCE_DIR) / "configs" / "ctr-synth.toml")
                   << "\n[[trackers]]\nuse = \"jsonl\"\n";
  const auto train = [&](const std::string& tables) {
    const auto r = loom_test::run_host(
        "launch --nproc-per-node 2 -- run " + m.string() + " --set run.dir=\"" + dir.string() + "\" --set run.name=" +
        tables + " --set run.steps=20 --set run.log_every=1 --set data.batch_size=128 --set data.files=\"" +
        (data / "train-000.tsv").string() + "\" --set eval_data.files=\"" + (data / "eval.tsv").string() +
        "\" --set distributed.sparse_tables=\"" + tables + "\"" + kOnTheGpu);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return loom_test::logged_losses(dir / tables);
  };
  const auto replicated = train("replicated"), sharded = train("row_sharded");
  REQUIRE(replicated.size() == 20);
  loom_mesh_test::check_close(replicated, sharded, 1e-5);
}
