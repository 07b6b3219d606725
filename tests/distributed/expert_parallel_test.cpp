// Expert parallelism ([distributed] expert_parallel = E) with real processes on Gloo:
// mixture-of-experts folders that transformers wrote (tests/hf_models/moe_reference.py), their
// experts computed by the ranks of each expert group with tokens sent there and back by
// all-to-all, against data parallelism alone and one process: losses and gradient norms for 20
// steps, LoRA on the attention projections, checkpoints resumed within and across layouts;
// each rank holding its own experts only, checkpoints and exports holding every expert as one
// process lays them out; what is not built refused.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <nlohmann/json.hpp>

#include "dist_helpers.hpp"
#include "mesh_runs.hpp"
#include "moe_folder.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using namespace loom_mesh_test;
using loom_test::moe_folder;

namespace {

const std::string kVocab = " --set data.vocab_size=64";

std::string moe_manifest(const fs::path& dir, const fs::path& folder) {
  return manifest(dir, "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" + folder.string() + "\"\nseq_len = 16\n");
}

std::string experts(int e) { return kVocab + " --set distributed.expert_parallel=" + std::to_string(e); }

// The parameters rank 0 of a launched run says it holds ("model hf_causal_lm: N parameters ...").
int64_t logged_parameters(const fs::path& run) {
  const std::string log = loom_test::read_file(run / "logs" / "rank-0.log");
  const std::string mark = "model hf_causal_lm: ";
  const size_t at = log.find(mark);
  REQUIRE(at != std::string::npos);
  return std::stoll(log.substr(at + mark.size()));
}

// The key projections' biases are left out of the comparisons below: softmax is blind to them,
// so their gradient is rounding noise, which AdamW turns into steps of the learning rate's size.
bool compared(const std::string& name) { return name.find("k_proj.bias") == std::string::npos; }

// A checkpoint's weights and optimizer state, read whole.
std::map<std::string, at::Tensor> trained_state(const fs::path& checkpoint) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : loom_dist_test::checkpoint_tensors(checkpoint))
    if ((name.rfind("model/", 0) == 0 || name.rfind("optimizer/", 0) == 0) && compared(name)) out[name] = t;
  return out;
}

std::map<std::string, at::Tensor> exported(const fs::path& folder) { return exported_weights(folder, compared); }

}  // namespace

TEST_CASE("expert parallel 2, alone and with data parallel 2, gives data parallelism's run and one process's") {
  const fs::path dir = loom_test::tmp_dir("ep-equivalence");
  // Without the aux loss in the loss (each rank's own routers make it), every layout trains as
  // one process; with it, as data parallelism over the same ranks.
  const std::string plain = moe_manifest(dir, moe_folder(dir, "qwen2_moe", false));
  const Logged one = train(plain, "w1", {1}, kVocab);
  check_same_run(one, train(plain, "e2", {2}, experts(2)));
  check_same_run(one, train(plain, "e2d2", {4}, experts(2) + " --set distributed.shard=optimizer"));
  // Recomputed layers exchange their tokens again in backward.
  check_same_run(one, train(plain, "e2r", {2}, experts(2) + " --set model.activation_checkpointing=full"));
  const fs::path aux_dir = dir / "aux";
  fs::create_directories(aux_dir);
  const std::string with_aux = moe_manifest(aux_dir, moe_folder(aux_dir, "qwen3_moe", true));
  check_same_run(train(with_aux, "d2", {2}, kVocab), train(with_aux, "e2", {2}, experts(2)));
  check_same_run(train(with_aux, "d4", {4}, kVocab), train(with_aux, "e4", {4}, experts(4)));
}

TEST_CASE("LoRA on the attention projections of a mixture of experts trains on expert parallel 2 as in one process") {
  const fs::path dir = loom_test::tmp_dir("ep-lora");
  const std::string m = moe_manifest(dir, moe_folder(dir, "qwen2_moe", false));
  std::ofstream(m, std::ios::app) << "[lora]\ntargets = [\"q_proj\", \"v_proj\", \"o_proj\"]\nrank = 4\nalpha = 8.0\n";
  const std::string every10 = " --set checkpoint.every=10";
  const Logged one = train(m, "l1", {1}, kVocab + every10);
  const Logged two = train(m, "l2", {2}, experts(2) + every10);
  check_same_run(one, two);
  // The frozen experts stay out of the checkpoints: their checksum is one process's at any E.
  check_close(after_step_10(one), resumed_losses(m, "l1-from-2", {1}, "l2", kVocab), 1e-5);
  check_close(after_step_10(one), resumed_losses(m, "l2-from-1", {2}, "l1", experts(2)), 1e-5);
  // Frozen experts stored in a sharded save: the first part holds every one.
  const std::string stored = every10 + " --set checkpoint.frozen=include --set distributed.shard=optimizer";
  const Logged sharded = train(m, "l2d2", {4}, experts(2) + stored);
  CHECK(resumed_losses(m, "l2d2-from-l2d2", {4}, "l2d2", experts(2) + stored) == after_step_10(sharded));
  check_close(after_step_10(sharded), resumed_losses(m, "d4-from-l2d2", {4}, "l2d2", kVocab + stored), 1e-5);
}

TEST_CASE("each rank holds its own experts; checkpoints and exports hold every expert as one process lays them out") {
  const fs::path dir = loom_test::tmp_dir("ep-placement");
  const std::string m = moe_manifest(dir, moe_folder(dir, "qwen2_moe", false));
  std::ofstream(m, std::ios::app) << "[export]\ndtype = \"fp32\"\n";
  const std::string every10 = " --set checkpoint.every=10", zero2 = " --set distributed.shard=gradients";
  const Logged one = train(m, "p1", {1}, kVocab + every10);
  const Logged two = train(m, "p2", {2}, experts(2) + every10);
  const Logged sharded = train(m, "p2d2", {4}, experts(2) + every10 + zero2);
  check_same_run(one, two);
  check_same_run(one, sharded);
  const auto whole = trained_state(dir / "p1" / "checkpoints" / "step-20");
  int64_t all = 0, expert_elements = 0;
  for (const auto& [name, t] : loom_dist_test::weights(dir / "p1" / "checkpoints" / "step-20")) {
    all += t.numel();
    if (name.find(".experts.") != std::string::npos) expert_elements += t.numel();
  }
  CHECK(expert_elements > 0);
  CHECK(logged_parameters(dir / "p2") == all - expert_elements / 2);  // half the experts each
  CHECK(logged_parameters(dir / "p2d2") == all - expert_elements / 2);
  // Every expert's weights and optimizer state, in one process's layout, unsharded and sharded.
  check_whole_like(whole, trained_state(dir / "p2" / "checkpoints" / "step-20"));
  check_whole_like(whole, trained_state(dir / "p2d2" / "checkpoints" / "step-20"));
  CHECK(resumed_losses(m, "p2d2-from-p2d2", {4}, "p2d2", experts(2) + zero2) == after_step_10(sharded));
  check_close(after_step_10(one), resumed_losses(m, "p1-from-p2d2", {1}, "p2d2", kVocab), 1e-5);
  check_close(after_step_10(one), resumed_losses(m, "p2-from-p1", {2}, "p1", experts(2)), 1e-5);
  // The export at the end: every expert, as one process writes it.
  check_tensors_close(exported(dir / "p1" / "hf" / "step-20"), exported(dir / "p2" / "hf" / "step-20"), 1e-5);
  // [model] init_from one process's checkpoint: each rank takes its own experts from it.
  const std::string init = " --set model.init_from=" + (dir / "p1" / "checkpoints" / "step-20").string();
  check_same_run(train(m, "i1", {1}, kVocab + init), train(m, "i2", {2}, experts(2) + init));
}

TEST_CASE("checkpoints of an expert-parallel run resume bit for bit on their layout and within 1e-5 on others") {
  const fs::path dir = loom_test::tmp_dir("ep-checkpoints");
  const std::string m = moe_manifest(dir, moe_folder(dir, "mixtral", false));
  const std::string every10 = " --set checkpoint.every=10";
  const Logged one = train(m, "u1", {1}, kVocab + every10);
  const Logged two = train(m, "u2", {2}, experts(2) + every10);
  check_same_run(one, two);
  CHECK(resumed_losses(m, "r2-from-2", {2}, "u2", experts(2)) == after_step_10(two));  // bit for bit
  check_close(after_step_10(one), resumed_losses(m, "r1-from-2", {1}, "u2", kVocab), 1e-5);
  check_close(after_step_10(one), resumed_losses(m, "r4-from-1", {4}, "u1", experts(4)), 1e-5);
}

TEST_CASE("what expert parallelism cannot do is refused in one line, with exit code 2") {
  const fs::path dir = loom_test::tmp_dir("ep-refusals");
  const std::string m = moe_manifest(dir, moe_folder(dir, "mixtral", false));
  const std::string launch2 = "launch --nproc-per-node 2 -- run " + m;
  check_refused(launch2 + experts(4), "expert_parallel = 4 does not divide the 2 ranks");
  check_refused(launch2 + experts(2) + " --set distributed.shard=parameters", "shard = \"parameters\" is not built");
  check_refused("launch --nproc-per-node 2 -- run " + manifest(dir, kLlama) + " --set distributed.expert_parallel=2",
                "does not compute its experts over an expert-parallel group");
}
