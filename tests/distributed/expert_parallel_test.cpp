// Expert parallelism ([distributed] expert_parallel = E) with real processes on Gloo:
// mixture-of-experts folders that transformers wrote (tests/hf_models/moe_reference.py), their
// experts computed by the ranks of each expert group with tokens sent there and back by
// all-to-all, against data parallelism alone and one process: losses and gradient norms for 20
// steps, LoRA on the attention projections, checkpoints resumed within and across layouts;
// what is not built refused.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <nlohmann/json.hpp>

#include "dist_helpers.hpp"
#include "mesh_runs.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using namespace loom_mesh_test;

namespace {

const std::string kVocab = " --set data.vocab_size=64";

// A folder of `arch` as transformers saves it, with the aux loss in the training loss or not.
fs::path moe_folder(const fs::path& dir, const std::string& arch, bool aux_in_loss) {
  const fs::path folder = dir / arch;
  const auto written = loom_test::run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR +
                                            "/tests/hf_models/moe_reference.py write --arch " + arch + " --out " +
                                            folder.string() + " --seed 3");
  REQUIRE_MESSAGE(written.code == 0, written.err);
  nlohmann::json config = nlohmann::json::parse(loom_test::read_file(folder / "config.json"));
  config["output_router_logits"] = aux_in_loss;
  std::ofstream(folder / "config.json") << config.dump(2);
  return folder;
}

std::string moe_manifest(const fs::path& dir, const fs::path& folder) {
  return manifest(dir, "[model]\nuse = \"hf_causal_lm\"\nfrom = \"" + folder.string() + "\"\nseq_len = 16\n");
}

std::string experts(int e) { return kVocab + " --set distributed.expert_parallel=" + std::to_string(e); }

}  // namespace

TEST_CASE("expert parallel 2, alone and with data parallel 2, gives data parallelism's run and one process's") {
  const fs::path dir = loom_test::tmp_dir("ep-equivalence");
  // Without the aux loss in the loss (each rank's own routers make it), every layout trains as
  // one process; with it, as data parallelism over the same ranks.
  const std::string plain = moe_manifest(dir, moe_folder(dir, "qwen2_moe", false));
  const Logged one = train(plain, "w1", {1}, kVocab);
  check_same_run(one, train(plain, "e2", {2}, experts(2)));
  check_same_run(one, train(plain, "e2d2", {4}, experts(2) + " --set distributed.shard=optimizer"));
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
  check_same_run(train(m, "l1", {1}, kVocab), train(m, "l2", {2}, experts(2)));
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
