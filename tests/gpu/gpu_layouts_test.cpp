// gpu_layouts_test.cpp: the parallel layouts gpu_test.cpp does not run yet, with 2 ranks sharing
// one GPU over Gloo (NCCL refuses two ranks on a device), each against the run its CPU test
// compares it with (issue 52): expert parallelism against one process, context parallelism (ring
// attention) against one process, row-sharded embedding tables against replicated ones. None
// has run on a GPU yet. Part of gpu_tests (its main() skips the suite without a GPU).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <filesystem>
#include <fstream>
#include <string>

#include "logged_losses.hpp"
#include "mesh_runs.hpp"
#include "moe_folder.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_mesh_test::Layout;
using loom_mesh_test::Logged;

namespace {

// Every rank on the one GPU, talking over Gloo (its CUDA collectives stage through host memory).
const std::string kOnTheGpu = " --set run.device=\"cuda:0\" --set distributed.backend=\"gloo\"";

// The CPU tests' closeness for these layouts, a little wider: the GPU's sums run in other orders
// (atomics in the embedding and index-add backward), not the CPU's fixed ones.
void check_same_losses(const Logged& one, const Logged& other, double tolerance) {
  loom_mesh_test::check_close(one.loss, other.loss, tolerance);
}

}  // namespace

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
