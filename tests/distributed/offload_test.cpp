// Optimizer offload ([distributed] offload = "optimizer", train/optimizer_offload.hpp): the
// optimizer updates host copies of the parameters. On the CPU those copies are more memory in
// the same place, but the path is the one CUDA takes (copies out, the update on them, copies back), so an
// offloaded run must give the run without it bit for bit: the same AdamW over the same values.
// Checked alone and with every shard mode on 2 ranks, with LoRA, through resumes in both
// directions, updated piece by piece (adamw, sgd); what offload does not combine with yet is
// refused by name.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <fstream>

#include <loom/torch.hpp>

#include "abi/compute_components.hpp"
#include "dist_helpers.hpp"
#include "train/flat_params.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using namespace loom_dist_test;

namespace {

// A small gpt without dropout (its blocks are the units shard = "parameters" gathers).
std::string gpt_manifest(const fs::path& dir, int steps) {
  return manifest(dir, steps, "[model]\nuse = \"gpt\"\nn_layer = 2\nn_head = 2\nn_embd = 32\nseq_len = 16\n");
}

std::string launch(int ranks, const std::string& m, const std::string& name, const std::string& shard,
                   const std::string& offload) {
  const std::string run = "run " + m + " --set run.name=" + name + " --set data.batch_size=" + std::to_string(8 / ranks) +
                          " --set distributed.shard=" + shard + " --set distributed.offload=" + offload +
                          " --set distributed.bucket_mb=0.01" +
                          // pieces of 1024 floats: the update goes piece by piece over every group
                          (offload == "none" ? "" : " --set distributed.offload_piece_mb=0.00390625");
  return ranks == 1 ? run : "launch --nproc-per-node " + std::to_string(ranks) + " -- " + run;
}

void check_same_weights(const fs::path& a, const fs::path& b) {
  const auto want = checkpoint_tensors(a), got = checkpoint_tensors(b);
  REQUIRE(want.size() == got.size());
  for (const auto& [name, t] : want) {
    if (name.rfind("model/", 0) != 0 && name.rfind("optimizer/", 0) != 0) continue;
    REQUIRE_MESSAGE(got.count(name), name);
    CHECK_MESSAGE(at::equal(t, got.at(name)), name);
  }
}

}  // namespace

TEST_CASE("an offloaded optimizer gives the run without it bit for bit, alone and in every shard mode") {
  const fs::path dir = loom_test::tmp_dir("offload-equal");
  const std::string m = gpt_manifest(dir, 20);
  struct Layout {
    int ranks;
    const char* shard;
  };
  for (const Layout l : {Layout{1, "none"}, Layout{2, "none"}, Layout{2, "optimizer"}, Layout{2, "gradients"},
                         Layout{2, "parameters"}}) {
    const std::string layout = std::to_string(l.ranks) + "-" + l.shard;
    CAPTURE(layout);
    const auto plain = run_host(launch(l.ranks, m, layout + "-plain", l.shard, "none"));
    REQUIRE_MESSAGE(plain.code == 0, plain.err);
    const auto offloaded = run_host(launch(l.ranks, m, layout + "-offload", l.shard, "optimizer"));
    REQUIRE_MESSAGE(offloaded.code == 0, offloaded.err);
    CHECK(offloaded.err.find("the optimizer updates a copy of the parameters in host memory") != std::string::npos);
    CHECK(offloaded.err.find(" pieces of at most 0.00390625 MiB, each copy overlapping another's update") !=
          std::string::npos);
    CHECK(offloaded.err.find("offloaded to host memory: the optimizer's state and copies") != std::string::npos);
    const auto expected = losses(dir / (layout + "-plain"));
    REQUIRE(expected.size() == 20);
    CHECK(losses(dir / (layout + "-offload")) == expected);
    check_same_weights(dir / (layout + "-plain") / "checkpoints" / "step-20",
                       dir / (layout + "-offload") / "checkpoints" / "step-20");
  }
}

TEST_CASE("adamw and sgd update piece by piece to the whole step's bits; a piece they do not hold is refused") {
  using loom::tensor;
  const loom::RunContext run{LOOM_TEST_TMP, "cpu", 0, 0, 1, 10};
  const auto options = [](const std::string& optimizer) {
    return optimizer == "adamw" ? toml::table{{"lr", 0.01}, {"weight_decay", 0.1}}
                                : toml::table{{"lr", 0.01}, {"momentum", 0.9}, {"weight_decay", 0.1}};
  };
  for (const std::string optimizer : {"adamw", "sgd"}) {
    CAPTURE(optimizer);
    // fp32 weights (adamw's fused loop) and a bf16 bias (its tensor ops), one group each.
    struct Params {
      at::Tensor w = at::linspace(-2, 2, 35).reshape({5, 7});
      at::Tensor b = at::linspace(-1, 1, 9).to(at::kBFloat16);
      std::vector<loom::ModelParam> list() { return {{"w", &w, 0}, {"b", &b, LOOM_PARAM_FLAG_NO_DECAY}}; }
    } whole_params, piece_params;
    auto whole_list = whole_params.list(), piece_list = piece_params.list();
    loom::FlatParams whole_flat(whole_list, loom::ShardSpec{}), piece_flat(piece_list, loom::ShardSpec{});
    loom::OptimizerInstance whole(loom_test::plugin_slot(LOOM_KIND_OPTIMIZER, "optimizer", optimizer, options(optimizer)),
                                  run, whole_flat.abi());
    loom::OptimizerInstance pieces(loom_test::plugin_slot(LOOM_KIND_OPTIMIZER, "optimizer", optimizer, options(optimizer)),
                                   run, piece_flat.abi());
    REQUIRE(pieces.updates_pieces());
    REQUIRE(whole_flat.abi().group_count == 2);
    for (int64_t step = 1; step <= 3; ++step) {
      for (size_t g = 0; g < 2; ++g) {
        const at::Tensor grad = at::randn({tensor(whole_flat.abi().groups[g]->grads).numel()});
        tensor(whole_flat.abi().groups[g]->grads).copy_(grad);
        tensor(piece_flat.abi().groups[g]->grads).copy_(grad);
      }
      whole.step(0.01, step);
      for (size_t g = 0; g < 2; ++g)
        for (int64_t begin = 0, n = tensor(piece_flat.abi().groups[g]->params).numel(); begin < n; begin += 4)
          pieces.step_range(0.01, step, g, begin, std::min(n, begin + 4));
    }
    CHECK_FALSE(at::equal(whole_params.w, Params().w));  // the steps moved the weights
    for (size_t g = 0; g < 2; ++g)
      CHECK(at::equal(tensor(whole_flat.abi().groups[g]->params), tensor(piece_flat.abi().groups[g]->params)));
    const auto states = whole.state(), piece_states = pieces.state();
    REQUIRE(states.size() == piece_states.size());
    for (size_t i = 0; i < states.size(); ++i) CHECK_MESSAGE(at::equal(*states[i].tensor, *piece_states[i].tensor), states[i].name);

    for (const auto& [group, end] : {std::pair<size_t, int64_t>{2, 1}, {0, 36}}) {
      try {
        pieces.step_range(0.01, 4, group, 0, end);
        FAIL("a piece outside the groups was taken");
      } catch (const loom::Failure& f) {
        CHECK(std::string(f.what()).find("which it does not hold") != std::string::npos);
      }
    }
  }
}

// One process with and without offload, `sets` added to both: the same losses and step-10
// checkpoint bit for bit. Returns the offloaded run's log.
std::string same_in_one_process(const std::string& tag, const std::string& sets) {
  const fs::path dir = loom_test::tmp_dir(tag);
  const std::string m = gpt_manifest(dir, 12);
  std::string offloaded_log;
  for (const char* where : {"none", "optimizer"}) {
    const auto r = run_host(launch(1, m, where, "none", where) + sets);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    offloaded_log = r.err;
  }
  const auto expected = losses(dir / "none");
  REQUIRE(expected.size() == 12);
  CHECK(losses(dir / "optimizer") == expected);
  check_same_weights(dir / "none" / "checkpoints" / "step-10", dir / "optimizer" / "checkpoints" / "step-10");
  return offloaded_log;
}

TEST_CASE("one process sends pieces during the backward: with grad_accum 2 and activation checkpointing bit for bit") {
  const std::string log =
      same_in_one_process("offload-early", " --set run.grad_accum=2 --set model.activation_checkpointing=\"full\"");
  CHECK_MESSAGE(log.find("pieces went to the host during the backward of the step's last micro-batch") !=
                    std::string::npos, log);
}

TEST_CASE("sgd with momentum, updated piece by piece, gives the run without offload bit for bit") {
  same_in_one_process("offload-sgd",
                      " --set optimizer.use=sgd --set optimizer.momentum=0.9 --set optimizer.weight_decay=0.1");
}

TEST_CASE("with LoRA the offloaded optimizer updates the adapters only, as without it") {
  const fs::path dir = loom_test::tmp_dir("offload-lora");
  const std::string m = gpt_manifest(dir, 12);
  std::ofstream(m, std::ios::app) << "[lora]\ntargets = [\"c_attn\", \"c_proj\", \"c_fc\"]\nrank = 4\nalpha = 8.0\n";
  for (const char* where : {"none", "optimizer"}) {
    const auto r = run_host(launch(2, m, where, "gradients", where));
    REQUIRE_MESSAGE(r.code == 0, r.err);
  }
  CHECK(losses(dir / "optimizer") == losses(dir / "none"));
  check_same_weights(dir / "none" / "checkpoints" / "step-10", dir / "optimizer" / "checkpoints" / "step-10");
}

TEST_CASE("offloaded runs resume bit for bit, from checkpoints with or without offload, and on fewer ranks") {
  const fs::path dir = loom_test::tmp_dir("offload-resume");
  const std::string m = gpt_manifest(dir, 20);
  REQUIRE(run_host(launch(2, m, "whole", "optimizer", "optimizer")).code == 0);
  // Saved at step 10 without offload, resumed with it (and the other way round): the host copies
  // are read again after the checkpoint wrote the weights, the state goes into the host's tensors.
  for (const auto& [first, second] : {std::pair<const char*, const char*>{"none", "optimizer"}, {"optimizer", "none"}}) {
    const std::string name = std::string("from-") + first;
    CAPTURE(name);
    REQUIRE(run_host(launch(2, m, name, "optimizer", first) + " --set run.steps=10").code == 0);
    const auto resumed = run_host(launch(2, m, name, "optimizer", second));
    REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
    CHECK(resumed.err.find("resumed from") != std::string::npos);
    CHECK(losses(dir / name) == losses(dir / "whole"));
    check_same_weights(dir / "whole" / "checkpoints" / "step-20", dir / name / "checkpoints" / "step-20");
  }
  // The 2 ranks' sharded checkpoint at step 10, resumed on one rank: with offload as without.
  REQUIRE(run_host(launch(2, m, "half", "optimizer", "optimizer") + " --set run.steps=10").code == 0);
  for (const char* where : {"none", "optimizer"}) {
    const std::string name = std::string("one-") + where;
    fs::copy(dir / "half", dir / name, fs::copy_options::recursive);
    const auto resumed = run_host(launch(1, m, name, "none", where));
    REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
    CHECK(resumed.err.find("resumed from") != std::string::npos);
  }
  CHECK(losses(dir / "one-optimizer") == losses(dir / "one-none"));
  check_same_weights(dir / "one-none" / "checkpoints" / "step-20", dir / "one-optimizer" / "checkpoints" / "step-20");
}

TEST_CASE("offload is refused with the parallel axes it does not take yet, and an unknown value by name") {
  const fs::path dir = loom_test::tmp_dir("offload-refused");
  const std::string m = gpt_manifest(dir, 2);
  const auto tensor = run_host("run " + m + " --set distributed.offload=optimizer --set distributed.tensor_parallel=2");
  CHECK(tensor.code == 2);
  CHECK(tensor.err.find("[distributed] offload = \"optimizer\" with tensor_parallel = 2 is not built yet") !=
        std::string::npos);
  CHECK(tensor.err.find("error: --set distributed.offload: ") != std::string::npos);  // where it was set
  const auto piece = run_host("run " + m + " --set distributed.offload_piece_mb=8");
  CHECK(piece.code == 2);
  CHECK(piece.err.find("[distributed] offload_piece_mb does nothing without offload = \"optimizer\"") !=
        std::string::npos);
  const auto unknown = run_host("run " + m + " --set distributed.offload=gradients");
  CHECK(unknown.code == 2);
  CHECK(unknown.err.find("offload") != std::string::npos);
  CHECK(unknown.err.find("optimizer") != std::string::npos);
}
