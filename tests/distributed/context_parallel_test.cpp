// Context parallelism ([distributed] context_parallel, ring attention) with real processes on
// Gloo: a grouped-query llama whose rows are cut into chunks from both ends over rings of 2 and
// 4 ranks, alone, with tensor parallelism and with data parallelism, trains to one process's
// losses and gradient norms; gpt's learned positions follow the chunks; one step changes every
// weight as one process does; a Mistral folder's sliding window crosses the chunks; evaluation
// cuts its rows too; checkpoints resume exactly on their layout and within 1e-5 on any other;
// what it cannot do is refused in one line. (Packed documents: sequence_parallel_packed_test.)
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "dist_helpers.hpp"
#include "mesh_runs.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using namespace loom_mesh_test;

namespace {

// ranks processes, rings of `ring`, tensor_parallel = tensor, data parallel over the rest.
Layout ring_of(int ranks, int ring, int tensor = 1) { return Layout{ranks, tensor, 1, ring}; }

}  // namespace

TEST_CASE("rings of 2 and 4 (more ranks than key/value heads), with tensor parallel 2, data parallel 2 and recomputed blocks, give one process's run") {
  const fs::path dir = loom_test::tmp_dir("cp-equivalence");
  const std::string m = manifest(dir, kLlama);
  const Logged one = train(m, "w1", {1});
  check_same_run(one, train(m, "c2", ring_of(2, 2)));
  check_same_run(one, train(m, "c4", ring_of(4, 4)));
  check_same_run(one, train(m, "c2t2", ring_of(4, 2, 2)));
  check_same_run(one, train(m, "c2d2", ring_of(4, 2), " --set distributed.shard=gradients"));
  // Recomputed blocks run the ring again inside backward, in the same order on every rank.
  check_same_run(one, train(m, "c2-recompute", ring_of(2, 2), " --set model.activation_checkpointing=full"));
}

TEST_CASE("gpt (learned positions, GPT-2's fused q/k/v) over rings of 2 and 4 gives one process's run (SGD)") {
  // SGD, as in sequence_parallel_test: one process runs GPT-2's attention through Loom's CPU
  // kernel, the ring through block attention; AdamW would magnify that rounding in 20 steps.
  const fs::path dir = loom_test::tmp_dir("cp-gpt");
  const std::string m =
      manifest(dir, "[model]\nuse = \"gpt\"\nn_layer = 2\nn_head = 4\nn_embd = 32\nseq_len = 16\n", "sgd", 0.5);
  const Logged one = train(m, "w1", {1});
  check_same_run(one, train(m, "c2", ring_of(2, 2)));
  check_same_run(one, train(m, "c4", ring_of(4, 4)));
}

TEST_CASE("one SGD step over a ring of 2 changes every weight as one process does: every gradient within 1e-5") {
  const fs::path dir = loom_test::tmp_dir("cp-gradients");
  // With Qwen3's per-head norms before the rotation, whose positions are the chunks'.
  const std::string m = manifest(dir, kLlama + "qk_norm = true\n", "sgd", 1.0);
  check_one_step_changes(m, ring_of(2, 2), "model/model.layers.0.self_attn.k_proj.weight");
}

TEST_CASE("hf_causal_lm on a Mistral folder with a 5-position sliding window: a ring of 4 gives one process's run") {
  // Chunks of 2 positions: the window spans three of them; transformers writes the folder.
  const fs::path dir = loom_test::tmp_dir("cp-window");
  const fs::path folder = write_mistral_window(dir);
  const std::string m = manifest(dir, "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" + folder.string() + "\"\nseq_len = 16\n");
  const std::string vocab = " --set data.vocab_size=64";
  check_same_run(train(m, "w1", {1}, vocab), train(m, "c4", ring_of(4, 4), vocab));
}

TEST_CASE("a context-parallel checkpoint resumes bit for bit on its layout and within 1e-5 on any other; evaluation sees whole rows") {
  const fs::path dir = loom_test::tmp_dir("cp-checkpoints");
  const std::string m = manifest(dir, kLlama);
  std::ofstream(m, std::ios::app) << kEvalEvery10;
  const std::string every10 = " --set checkpoint.every=10";
  const Logged one = train(m, "u1", {1}, every10);
  const Logged two = train(m, "u2", ring_of(2, 2), every10);
  check_same_run(one, two);
  check_same_evaluations(dir / "u1", dir / "u2");

  const auto resumed = [&](const std::string& name, const Layout& at, const std::string& from) {
    return resumed_losses(m, name, at, from);
  };
  const auto& last = after_step_10;
  CHECK(resumed("r2-from-2", ring_of(2, 2), "u2") == last(two));  // bit for bit
  check_close(last(one), resumed("r1-from-2", {1}, "u2"), 1e-5);
  check_close(last(one), resumed("r2-from-1", ring_of(2, 2), "u1"), 1e-5);
  check_close(last(one), resumed("r4-from-2", ring_of(4, 4), "u2"), 1e-5);
  check_close(last(one), resumed("s2-from-2", {2, 1, 2}, "u2"), 1e-5);  // Ulysses from the ring
}

TEST_CASE("what context parallelism cannot do is refused in one line, with exit code 2") {
  const fs::path dir = loom_test::tmp_dir("cp-refusals");
  const std::string m = manifest(dir, kLlama);
  const std::string launch2 = "launch --nproc-per-node 2 -- run " + m + " --set distributed.context_parallel=";
  check_refused(launch2 + "4", "context_parallel = 4 times tensor_parallel = 1 does not divide the 2 ranks");
  check_refused(launch2 + "2 --set distributed.sequence_parallel=2", "sequence_parallel = 2 with context_parallel = 2 is not built");
  check_refused(launch2 + "2 --set model.dropout=0.1", "dropout");
  check_refused(launch2 + "2 --set data.seq_len=14 --set model.seq_len=14", "rows of 14 positions cannot be cut into");
  check_refused(launch2 + "2 --set distributed.expert_parallel=2", "expert_parallel = 2 with tensor_parallel, sequence_parallel or context_parallel");
  check_refused("launch --nproc-per-node 2 -- run " + manifest(dir, "[model]\nuse = \"mlp_lm\"\n") +
                    " --set distributed.context_parallel=2",
                "model mlp_lm does not attend over rings of chunks");
}
