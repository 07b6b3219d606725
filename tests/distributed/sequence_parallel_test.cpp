// Sequence parallelism ([distributed] sequence_parallel, DeepSpeed-Ulysses) with real processes
// on Gloo: a llama whose rows are cut over 2 and 4 ranks, alone, with tensor parallelism, and
// with data parallelism in every shard mode, trains to one process's losses and gradient norms;
// one step changes every weight as one process does; a Mistral folder's sliding window and
// evaluation see whole rows; checkpoints resume exactly on their layout
// and within 1e-5 on any other; what it cannot do is refused in one line.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "dist_helpers.hpp"
#include "mesh_runs.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using namespace loom_mesh_test;

TEST_CASE("sequence parallel 2 and 4, with tensor parallel 2 and with data parallel 2 in every shard mode, give one process's run") {
  const fs::path dir = loom_test::tmp_dir("sp-equivalence");
  const std::string m = manifest(dir, kLlama);
  const Logged one = train(m, "w1", {1});
  check_same_run(one, train(m, "s2", {2, 1, 2}));
  for (const std::string shard : {"none", "optimizer", "gradients", "parameters"}) {
    CAPTURE(shard);
    check_same_run(one, train(m, "s2d2-" + shard, {4, 1, 2}, " --set distributed.shard=" + shard));
  }
  // Four ranks to a group, or two of each kind, have more ranks than key/value heads: each is
  // repeated for its queries before the exchange.
  check_same_run(one, train(m, "s4", {4, 1, 4}));
  check_same_run(one, train(m, "s2t2", {4, 2, 2}));
}

TEST_CASE("gpt (learned positions, GPT-2's fused q/k/v) with rows cut over 2 and 4 ranks gives one process's run (SGD)") {
  // SGD: one process runs GPT-2's attention through Loom's CPU kernel (packed_attention.cpp), the
  // pieces through LibTorch's; with AdamW this tiny model makes that rounding grow to 3e-5 in 20
  // steps (data parallelism alone, on the same kernel: 3e-6), while SGD keeps the runs at 1e-7.
  const fs::path dir = loom_test::tmp_dir("sp-gpt");
  const std::string m =
      manifest(dir, "[model]\nuse = \"gpt\"\nn_layer = 2\nn_head = 4\nn_embd = 32\nseq_len = 16\n", "sgd", 0.5);
  const Logged one = train(m, "w1", {1});
  check_same_run(one, train(m, "s2", {2, 1, 2}));
  check_same_run(one, train(m, "s4", {4, 1, 4}));
}

TEST_CASE("one SGD step with rows cut in two changes every weight as one process does: every gradient within 1e-5") {
  const fs::path dir = loom_test::tmp_dir("sp-gradients");
  // With Qwen3's per-head norms, which see each head's whole rows after the exchange.
  const std::string m = manifest(dir, kLlama + "qk_norm = true\n", "sgd", 1.0);
  check_one_step_changes(m, {2, 1, 2}, "model/model.layers.0.self_attn.q_proj.weight");
}

TEST_CASE("hf_causal_lm on a Mistral folder with a 5-position sliding window: rows cut in two give one process's run") {
  // The window crosses the pieces' edge (8 positions each); transformers writes the folder.
  const fs::path dir = loom_test::tmp_dir("sp-window");
  const fs::path folder = write_mistral_window(dir);
  const std::string m = manifest(dir, "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" + folder.string() + "\"\nseq_len = 16\n");
  const std::string vocab = " --set data.vocab_size=64";
  check_same_run(train(m, "w1", {1}, vocab), train(m, "s2", {2, 1, 2}, vocab));
}

TEST_CASE("evaluation cuts its rows too: the same eval_loss and eval_tokens as one process") {
  const fs::path dir = loom_test::tmp_dir("sp-eval");
  const std::string m = manifest(dir, kLlama);
  std::ofstream(m, std::ios::app) << kEvalEvery10;
  train_steps(m, "e1", {1}, "");
  train_steps(m, "e2", {2, 1, 2}, "");
  check_same_evaluations(dir / "e1", dir / "e2");
}

TEST_CASE("a sequence-parallel checkpoint resumes bit for bit on its layout and within 1e-5 on any other") {
  const fs::path dir = loom_test::tmp_dir("sp-checkpoints");
  const std::string m = manifest(dir, kLlama);
  const std::string every10 = " --set checkpoint.every=10";
  const Logged one = train(m, "u1", {1}, every10);
  const Logged two = train(m, "u2", {2, 1, 2}, every10);
  const Logged four = train(m, "u4", {4, 1, 2}, every10 + " --set distributed.shard=optimizer");
  check_same_run(one, two);
  check_same_run(one, four);
  const auto exported = run_host("export " + (dir / "u2").string() + " --dtype fp32 --out " + (dir / "u2-hf").string());
  CHECK_MESSAGE(exported.code == 0, exported.err);

  const auto resumed = [&](const std::string& name, const Layout& at, const std::string& from,
                           const std::string& extra = "") { return resumed_losses(m, name, at, from, extra); };
  const auto& last = after_step_10;
  CHECK(resumed("r2-from-2", {2, 1, 2}, "u2") == last(two));  // bit for bit
  CHECK(resumed("r4-from-4", {4, 1, 2}, "u4", " --set distributed.shard=optimizer") == last(four));
  check_close(last(one), resumed("r1-from-2", {1}, "u2"), 1e-5);
  check_close(last(one), resumed("r2-from-1", {2, 1, 2}, "u1"), 1e-5);
  check_close(last(one), resumed("r2-from-4", {2, 1, 2}, "u4"), 1e-5);
  check_close(last(one), resumed("r2d2-from-2", {4, 1, 2}, "u2", " --set distributed.shard=parameters"), 1e-5);
}

TEST_CASE("what sequence parallelism cannot do is refused in one line, with exit code 2") {
  const fs::path dir = loom_test::tmp_dir("sp-refusals");
  const std::string m = manifest(dir, kLlama);
  const std::string launch2 = "launch --nproc-per-node 2 -- run " + m + " --set distributed.sequence_parallel=";
  check_refused(launch2 + "4", "sequence_parallel = 4 times tensor_parallel = 1 does not divide the 2 ranks");
  check_refused(launch2 + "2 --set distributed.tensor_parallel=2", "does not divide the 2 ranks");
  check_refused(launch2 + "2 --set model.n_head=1 --set model.n_kv_head=1",
                "n_head) = 1 is not a multiple of [distributed] sequence_parallel");
  check_refused(launch2 + "2 --set model.dropout=0.1", "dropout");
  check_refused(launch2 + "2 --set data.seq_len=15 --set model.seq_len=15", "rows of 15 positions cannot be cut into");
  check_refused("launch --nproc-per-node 2 -- run " + manifest(dir, "[model]\nuse = \"mlp_lm\"\n") +
                    " --set distributed.sequence_parallel=2",
                "model mlp_lm does not take pieces of rows");
}
