// Tensor parallelism ([distributed] tensor_parallel) with real processes on Gloo: a llama split
// over 2 and 4 ranks, alone and with data parallelism and every shard mode, trains to one
// process's losses and gradient norms; a Hugging Face folder and a Loom checkpoint load into
// the pieces; what is not built yet is refused in one line before anything trains.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "dist_helpers.hpp"
#include "mesh_runs.hpp"
#include "formats/weight_loading.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using namespace loom_mesh_test;

TEST_CASE("tensor parallel 2 and 4, alone and with data parallel 2 in every shard mode, give one process's run") {
  const fs::path dir = loom_test::tmp_dir("tp-equivalence");
  const std::string m = manifest(dir, kLlama);
  const Logged one = train(m, "w1", {1, 1});
  check_same_run(one, train(m, "t2", {2, 2}));
  for (const std::string shard : {"none", "optimizer", "gradients", "parameters"}) {
    CAPTURE(shard);
    check_same_run(one, train(m, "t2d2-" + shard, {4, 2}, " --set distributed.shard=" + shard));
  }
  // Four ranks to a group need four key/value heads.
  const std::string heads = " --set model.n_kv_head=4";
  check_same_run(train(m, "w1-mha", {1, 1}, heads), train(m, "t4", {4, 4}, heads));
}

TEST_CASE("per-head norms (Qwen3) split with their heads: SGD keeps the runs together for 20 steps") {
  // With AdamW, q_norm and k_norm make this tiny model chaotic: the rounding of a sum split in
  // two (or, data parallel alone, of the gradient all-reduce) grows to 1e-5 within 20 steps;
  // SGD shows that the split computes the same gradients.
  const fs::path dir = loom_test::tmp_dir("tp-qk-norm");
  const std::string m = manifest(dir, kLlama + "qk_norm = true\n", "sgd", 0.5);
  check_same_run(train(m, "w1", {1, 1}), train(m, "t2", {2, 2}));
}

TEST_CASE("a checkpoint and a Hugging Face folder load into each rank's pieces") {
  const fs::path dir = loom_test::tmp_dir("tp-loading");
  const std::string m = manifest(dir, kLlama);
  const auto saved = run_host("run " + m + " --set run.name=source --set run.steps=5 --set checkpoint.every=5");
  REQUIRE_MESSAGE(saved.code == 0, saved.err);
  const auto exported = run_host("export " + (dir / "source").string() + " --dtype fp32 --out " + (dir / "hf").string());
  REQUIRE_MESSAGE(exported.code == 0, exported.err);

  const double fresh = logged(dir / "source").loss.front();
  const std::string from_checkpoint = " --set model.init_from=" + (dir / "source" / "checkpoints" / "step-5").string();
  const Logged initialised = train(m, "init1", {1, 1}, from_checkpoint);
  check_same_run(initialised, train(m, "init2", {2, 2}, from_checkpoint));
  CHECK(initialised.loss.front() < fresh);  // the trained weights, not a fresh model

  const std::string folder =
      manifest(dir, "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" + (dir / "hf").string() + "\"\nseq_len = 16\n");
  const Logged whole = train(folder, "hf1", {1, 1});
  check_same_run(whole, train(folder, "hf2", {2, 2}));
  CHECK(whole.loss.front() < fresh);
}

TEST_CASE("[export] of a tensor-parallel run writes the folder its own checkpoint exports, every weight whole") {
  const fs::path dir = loom_test::tmp_dir("tp-export");
  const std::string m = manifest(dir, kLlama);
  std::ofstream(m, std::ios::app) << "[export]\nevery = 10\ndtype = \"fp32\"\n[checkpoint]\nevery = 20\n";
  train(m, "x2", {4, 2}, " --set distributed.shard=optimizer");
  const auto exported = run_host("export " + (dir / "x2").string() + " --dtype fp32 --out " + (dir / "from-checkpoint").string());
  REQUIRE_MESSAGE(exported.code == 0, exported.err);
  const std::string during = loom_test::read_file(dir / "x2" / "hf" / "step-20" / "model.safetensors");
  CHECK(during.size() > 100000);  // 41,248 fp32 parameters
  CHECK(during == loom_test::read_file(dir / "from-checkpoint" / "model.safetensors"));  // bit for bit
  CHECK(fs::exists(dir / "x2" / "hf" / "step-10" / "config.json"));
}

TEST_CASE("LoRA adapters follow the split: column- and row-parallel layers adapted on 2 ranks give one process's run, and resume anywhere") {
  const fs::path dir = loom_test::tmp_dir("tp-lora");
  // B starts at zero; from the second step on A's gradient is the group's sum (AdamW at lr 0.05
  // makes this tiny model chaotic: 3e-5 apart after 20 steps, while SGD at 0.05 stays at 1e-7).
  const std::string m = manifest(dir, kLlama, "adamw", 0.01);
  std::ofstream(m, std::ios::app) << "[lora]\ntargets = [\"q_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"down_proj\"]\n"
                                     "rank = 4\nalpha = 8.0\n[export]\ndtype = \"fp32\"\n[checkpoint]\nevery = 10\n";
  const Logged one = train(m, "l1", {1, 1});
  const Logged two = train(m, "l2", {2, 2});
  check_same_run(one, two);
  CHECK(one.loss.back() < one.loss.front());  // the adapters trained
  // The merged export at the end: the same weights from either layout, every tensor whole.
  const loom::formats::HfWeightSource from_one((dir / "l1" / "hf" / "step-20").string()),
      from_two((dir / "l2" / "hf" / "step-20").string());
  REQUIRE(from_one.names() == from_two.names());
  for (const std::string& name : from_one.names()) {
    CAPTURE(name);
    const at::Tensor want = from_one.view(name), got = from_two.view(name);
    REQUIRE(got.sizes() == want.sizes());
    CHECK((got - want).norm().item<double>() <= 1e-4 * want.norm().item<double>() + 1e-6);
  }
  // Checkpoints keep the checksum of the whole frozen base: they resume on any layout, bit for bit
  // on their own, and export their adapters for PEFT whole.
  CHECK(resumed_losses(m, "r2", {2, 2}, "l2") == after_step_10(two));
  check_close(after_step_10(one), resumed_losses(m, "r1", {1, 1}, "l2"), 1e-5);
  const auto peft = run_host("export " + (dir / "l2").string() + " --format peft --out " + (dir / "peft").string());
  CHECK_MESSAGE(peft.code == 0, peft.err);
  CHECK(fs::exists(dir / "peft" / "adapter_model.safetensors"));
  check_refused("launch --nproc-per-node 2 -- run " + m + " --set distributed.tensor_parallel=2 --set lora.dropout=0.1",
                "would draw the same mask on every rank's piece");
}

TEST_CASE("what tensor parallelism cannot do yet is refused in one line, with exit code 2") {
  const fs::path dir = loom_test::tmp_dir("tp-refusals");
  const std::string m = manifest(dir, kLlama);
  const std::string launch2 = "launch --nproc-per-node 2 -- run " + m + " --set distributed.tensor_parallel=";
  check_refused(launch2 + "4", "tensor_parallel = 4 does not divide the 2 ranks");
  check_refused(launch2 + "2 --set model.n_kv_head=1", "n_kv_head) = 1 is not a multiple of");
  check_refused(launch2 + "2 --set model.dropout=0.1", "dropout");
  check_refused("launch --nproc-per-node 2 -- run " + manifest(dir, "[model]\nuse = \"mlp_lm\"\n") +
                    " --set distributed.tensor_parallel=2",
                "split none of its parameters");
}

TEST_CASE("a tensor-parallel checkpoint holds whole tensors: exact resume on its layout, any other layout within 1e-5") {
  const fs::path dir = loom_test::tmp_dir("tp-checkpoints");
  const std::string m = manifest(dir, kLlama);
  const std::string every10 = " --set checkpoint.every=10";
  const Logged one = train(m, "u1", {1, 1}, every10);
  const Logged two = train(m, "u2", {2, 2}, every10);
  check_same_run(one, two);
  // Whole tensors, as one process writes them.
  const auto whole = loom_dist_test::weights(dir / "u2" / "checkpoints" / "step-20");
  CHECK(whole.at("model/model.embed_tokens.weight").sizes() == at::IntArrayRef({256, 32}));
  const auto from_one = loom_dist_test::weights(dir / "u1" / "checkpoints" / "step-20");
  REQUIRE(from_one.size() == whole.size());
  for (const auto& [name, t] : from_one) {
    CAPTURE(name);
    CHECK(whole.at(name).sizes() == t.sizes());
  }
  const auto exported = run_host("export " + (dir / "u2").string() + " --dtype fp32 --out " + (dir / "u2-hf").string());
  CHECK_MESSAGE(exported.code == 0, exported.err);

  CHECK(resumed_losses(m, "r2-from-2", {2, 2}, "u2") == after_step_10(two));  // bit for bit
  check_close(after_step_10(one), resumed_losses(m, "r1-from-2", {1, 1}, "u2"), 1e-5);
  check_close(after_step_10(one), resumed_losses(m, "r2-from-1", {2, 2}, "u1"), 1e-5);
  check_close(after_step_10(one), resumed_losses(m, "r2d2-from-2", {4, 2}, "u2"), 1e-5);
}

TEST_CASE("with a shard mode each tensor rank's replicas write their parts; read whole, resumed on any layout") {
  const fs::path dir = loom_test::tmp_dir("tp-sharded-checkpoints");
  const std::string m = manifest(dir, kLlama);
  const std::string every10 = " --set checkpoint.every=10";
  const Logged one = train(m, "u1", {1, 1}, every10);
  const std::string optimizer = " --set distributed.shard=optimizer";
  const Logged sharded = train(m, "u4", {4, 2}, every10 + optimizer);
  check_same_run(one, sharded);
  // tensor-<t>/rank-<r>: two sets of two parts, read as whole tensors.
  const fs::path saved = dir / "u4" / "checkpoints" / "step-20";
  for (const char* part : {"tensor-00000/rank-00000", "tensor-00000/rank-00001", "tensor-00001/rank-00000",
                           "tensor-00001/rank-00001"})
    CHECK(fs::is_directory(saved / part));
  check_whole_like(loom_dist_test::weights(dir / "u1" / "checkpoints" / "step-20"), loom_dist_test::weights(saved));
  const auto exported = run_host("export " + (dir / "u4").string() + " --dtype fp32 --out " + (dir / "u4-hf").string());
  CHECK_MESSAGE(exported.code == 0, exported.err);

  CHECK(resumed_losses(m, "r4-from-4", {4, 2}, "u4", optimizer) == after_step_10(sharded));  // bit for bit
  check_close(after_step_10(one), resumed_losses(m, "r1-from-4", {1, 1}, "u4"), 1e-5);
  check_close(after_step_10(one), resumed_losses(m, "r2-from-4", {2, 2}, "u4"), 1e-5);
  check_close(after_step_10(one), resumed_losses(m, "r4p-from-1", {4, 2}, "u1", " --set distributed.shard=parameters"), 1e-5);
}

TEST_CASE("one SGD step on 2 ranks changes every weight as one process does: every gradient within 1e-5") {
  const fs::path dir = loom_test::tmp_dir("tp-gradients");
  const std::string m = manifest(dir, kLlama + "qk_norm = true\n", "sgd", 1.0);
  const std::string one_step = " --set run.steps=1 --set checkpoint.every=1";
  train_steps(m, "start", {1, 1}, one_step + " --set optimizer.lr=0.0");
  train_steps(m, "g1", {1, 1}, one_step);
  train_steps(m, "g2", {2, 2}, one_step);
  const auto start = loom_dist_test::weights(dir / "start" / "checkpoints" / "step-1");
  // lr 1, no clipping: the change of each weight is minus its gradient.
  const auto one = minus(start, loom_dist_test::weights(dir / "g1" / "checkpoints" / "step-1"));
  CHECK(one.at("model/model.layers.0.mlp.down_proj.weight").norm().item<double>() > 1e-4);  // it did train
  check_tensors_close(one, minus(start, loom_dist_test::weights(dir / "g2" / "checkpoints" / "step-1")), 1e-5);
}
