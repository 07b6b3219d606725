// Checkpoints that never lose a run, proven through the real host binary: a run killed with
// SIGKILL at different moments (even mid-save) and resumed ends with the same weights, byte
// for byte, as a run never interrupted; corrupt checkpoints are skipped; a failed save keeps
// the previous one; rotation keeps exactly what it should; SIGTERM saves and exits 0.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;
using loom_test::run_shell;

namespace {

// A small, fast, fully deterministic run: checkpoints every 10 steps.
std::string write_manifest(const fs::path& dir, const std::string& backend, int steps) {
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\nname = \"r\"\ndir = \"" << dir.string() << "\"\nsteps = " << steps
                      << "\nlog_every = 5\nthreads = 1\npeak_flops = 1e9\n"
                         "[model]\nuse = \"mlp_lm\"\nn_embd = 16\ncontext = 2\nhidden = 32\n"
                         "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\n"
                         "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n"
                         "[schedule]\nuse = \"warmup_cosine\"\nwarmup_steps = 5\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                         "[checkpoint]\nuse = \""
                      << backend << "\"\nevery = 10\nkeep = 10\n";
  return path.string();
}

fs::path ckpt_dir(const fs::path& dir) { return dir / "r" / "checkpoints"; }

std::set<std::string> checkpoint_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(ckpt_dir(dir))) names.insert(e.path().filename().string());
  return names;
}

// The final model weights of a finished run, as exported bytes.
std::string exported_weights(const fs::path& dir, int step) {
  const fs::path out = dir / ("export-" + std::to_string(step) + ".safetensors");
  const auto r = run_host("checkpoint export " + (ckpt_dir(dir) / ("step-" + std::to_string(step))).string() +
                          " --format hf-safetensors --out " + out.string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return loom_test::read_file(out);
}

std::string uninterrupted(const std::string& backend) {
  const fs::path dir = loom_test::tmp_dir("ckpt-ref-" + backend);
  const auto r = run_host("run " + write_manifest(dir, backend, 40));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return exported_weights(dir, 40);
}

// Starts a run in the background, waits for `ready` (a shell test), then SIGKILLs it.
void kill_when(const std::string& manifest, const std::string& ready, const std::string& env) {
  const std::string script = env + " " + LOOM_HOST_BIN + " run " + manifest +
                             " & pid=$!; for i in $(seq 1 3000); do " + ready +
                             " && break; kill -0 $pid 2>/dev/null || break; sleep 0.01; done; kill -9 $pid; wait $pid";
  run_shell("sh -c '" + script + "'");
}

}  // namespace

TEST_CASE("killed at any moment and resumed: the final weights equal an uninterrupted run's, both backends") {
  for (const std::string backend : {"safetensors", "torch_pickle"}) {
    CAPTURE(backend);
    const std::string reference = uninterrupted(backend);
    REQUIRE(reference.size() > 1000);
    struct Moment {
      const char* name;
      std::function<std::string(const fs::path&)> ready;  // shell test on the run's folder
    };
    const std::vector<Moment> moments = {
        // files half written, no index yet
        {"mid-save", [](const fs::path& d) { return "[ -d " + (ckpt_dir(d) / "step-20.tmp").string() + " ]"; }},
        // right after a checkpoint lands
        {"after-commit", [](const fs::path& d) { return "[ -f " + (ckpt_dir(d) / "step-10/index.json").string() + " ]"; }},
        // before any checkpoint exists
        {"early", [](const fs::path& d) { return "[ -f " + (d / "r/metrics.jsonl").string() + " ]"; }},
    };
    for (const auto& m : moments) {
      CAPTURE(m.name);
      const fs::path dir = loom_test::tmp_dir("ckpt-kill-" + backend + "-" + m.name);
      const std::string manifest = write_manifest(dir, backend, 40);
      const std::string ready = m.ready(dir);
      kill_when(manifest, ready, "LOOM_TEST_SAVE_DELAY_MS=400");
      CHECK_FALSE(fs::exists(ckpt_dir(dir) / "step-40"));  // it really died before the end
      const auto resumed = run_host("run " + manifest);
      REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
      CHECK(exported_weights(dir, 40) == reference);
    }
  }
}

TEST_CASE("corrupt, truncated or unindexed checkpoints are skipped with a warning") {
  const fs::path dir = loom_test::tmp_dir("ckpt-corrupt");
  const std::string manifest = write_manifest(dir, "safetensors", 40);
  REQUIRE(run_host("run " + manifest).code == 0);
  const fs::path ck = ckpt_dir(dir);
  fs::resize_file(ck / "step-40" / "state.safetensors", 100);  // truncated
  {
    std::fstream f(ck / "step-30" / "state.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');  // one flipped byte
  }
  fs::remove(ck / "step-20" / "index.json");  // a save that never committed
  const auto r = run_host("run " + manifest + " --set run.steps=50");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.err.find("skipping " + (ck / "step-40").string()) != std::string::npos);
  CHECK(r.err.find("skipping " + (ck / "step-30").string()) != std::string::npos);
  CHECK(r.err.find("skipping " + (ck / "step-20").string()) != std::string::npos);
  CHECK(r.err.find("resumed from " + (ck / "step-10").string() + " at step 10") != std::string::npos);
}

TEST_CASE("a save that cannot be written fails clearly and leaves the previous checkpoint intact") {
  const fs::path dir = loom_test::tmp_dir("ckpt-fail");
  const std::string manifest = write_manifest(dir, "safetensors", 20);
  REQUIRE(run_host("run " + manifest).code == 0);
  // Files may not grow past 8 KiB (ulimit -f counts 1024-byte blocks); SIGXFSZ ignored, so
  // write() fails with EFBIG exactly as a full disk would fail it with ENOSPC.
  const auto r = run_shell("sh -c 'trap \"\" XFSZ; ulimit -f 8; exec " + std::string(LOOM_HOST_BIN) + " run " +
                           manifest + " --set run.steps=40'");
  CHECK(r.code == 1);
  CHECK(loom_test::line_count(r.err.substr(r.err.find("error: "))) == 1);
  CHECK(r.err.find("error: ") != std::string::npos);
  CHECK(r.err.find("step-30") != std::string::npos);
  const auto names = checkpoint_names(dir);
  CHECK(names == std::set<std::string>{"step-10", "step-20"});  // no step-30, no .tmp debris
  const auto inspect = run_host("checkpoint inspect " + (ckpt_dir(dir) / "step-20").string());
  CHECK(inspect.code == 0);
  CHECK(inspect.out.find("valid") != std::string::npos);
}

TEST_CASE("keep and keep_every leave exactly the expected checkpoints") {
  const fs::path dir = loom_test::tmp_dir("ckpt-rotate");
  const auto r = run_host("run " + write_manifest(dir, "safetensors", 60) +
                          " --set checkpoint.keep=2 --set checkpoint.keep_every=20 --set checkpoint.async=false");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(checkpoint_names(dir) == std::set<std::string>{"step-20", "step-40", "step-50", "step-60"});
}

TEST_CASE("SIGTERM saves a checkpoint and exits 0; resuming finishes the run") {
  const fs::path dir = loom_test::tmp_dir("ckpt-sigterm");
  const std::string manifest = write_manifest(dir, "safetensors", 100000);
  const std::string script = std::string(LOOM_HOST_BIN) + " run " + manifest + " --set checkpoint.every=0 2>" +
                             (dir / "err.txt").string() + " & pid=$!; for i in $(seq 1 3000); do [ -f " +
                             (dir / "r" / "metrics.jsonl").string() +
                             " ] && break; sleep 0.01; done; kill -TERM $pid; wait $pid; echo rc=$?";
  const auto r = run_shell("sh -c '" + script + "'");
  CHECK(r.out.find("rc=0") != std::string::npos);
  const std::string err = loom_test::read_file(dir / "err.txt");
  CHECK(err.find("stopping after step") != std::string::npos);
  int64_t saved = -1;
  for (const auto& name : checkpoint_names(dir)) saved = std::stoll(name.substr(5));
  CHECK(saved > 0);
  const auto inspect = run_host("checkpoint inspect " + (ckpt_dir(dir) / ("step-" + std::to_string(saved))).string() +
                                " --json");
  REQUIRE(inspect.code == 0);
  CHECK(nlohmann::json::parse(inspect.out).at("metadata").at("step") == saved);
}

// A background job of sh ignores SIGINT until the host installs its handlers, so the signal is
// sent once the first step is logged (metrics.jsonl not empty), when training has begun.
TEST_CASE("Ctrl-C on a run without [checkpoint] says truthfully that nothing is saved") {
  const fs::path dir = loom_test::tmp_dir("ckpt-sigint-none");
  const std::string quickstart = std::string(LOOM_SOURCE_DIR) + "/configs/quickstart.toml";
  const std::string script = std::string(LOOM_HOST_BIN) + " run " + quickstart + " --set run.steps=100000 --set run.dir=" +
                             dir.string() + " 2>" + (dir / "err.txt").string() + " & pid=$!; for i in $(seq 1 3000); do [ -s " +
                             (dir / "quickstart" / "metrics.jsonl").string() +
                             " ] && break; sleep 0.01; done; kill -INT $pid; wait $pid; echo rc=$?";
  const auto r = run_shell("sh -c '" + script + "'");
  CHECK(r.out.find("rc=0") != std::string::npos);
  const std::string err = loom_test::read_file(dir / "err.txt");
  INFO(err);
  CHECK(err.find("nothing is saved: the manifest has no [checkpoint] table (add one to save on signals)") !=
        std::string::npos);
  CHECK(err.find("saving at the next step boundary") == std::string::npos);
  CHECK(err.find("; nothing saved: the manifest has no [checkpoint] table") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "quickstart" / "checkpoints"));
}

TEST_CASE("swapping the backend needs no rebuild and reads what the other one wrote") {
  const fs::path dir = loom_test::tmp_dir("ckpt-swap");
  const std::string manifest = write_manifest(dir, "safetensors", 20);
  REQUIRE(run_host("run " + manifest).code == 0);
  const auto r = run_host("run " + manifest + " --set run.steps=30 --set checkpoint.use=torch_pickle");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.err.find("resumed from " + (ckpt_dir(dir) / "step-20").string()) != std::string::npos);
  CHECK(fs::exists(ckpt_dir(dir) / "step-30" / "state.pt"));
}

TEST_CASE("resuming with a changed model is refused naming the key; harmless changes are reported") {
  const fs::path dir = loom_test::tmp_dir("ckpt-manifest");
  const std::string manifest = write_manifest(dir, "safetensors", 10);
  REQUIRE(run_host("run " + manifest).code == 0);
  const auto bad = run_host("run " + manifest + " --set run.steps=20 --set model.hidden=64");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("model.hidden was 32 and is now 64") != std::string::npos);
  const auto ok = run_host("run " + manifest + " --set run.steps=20 --set run.log_every=2");
  CHECK(ok.code == 0);
  CHECK(ok.err.find("run.log_every: 5 -> 2") != std::string::npos);
}

TEST_CASE("only components that keep state write it: a stateless dataset is named on resume") {
  const fs::path dir = loom_test::tmp_dir("ckpt-stateless");
  const fs::path manifest = dir / "m.toml";
  // The console tracker (C++ helpers, no state) and a dataset that keeps no position.
  std::ofstream(manifest) << "[run]\nname = \"r\"\ndir = \"" << dir.string()
                          << "\"\nsteps = 10\nthreads = 1\npeak_flops = 1e9\n"
                             "[plugins]\npaths = [\"" << LOOM_TEST_PLUGIN_DIR << "/stateless_data\"]\n"
                             "[model]\nuse = \"mlp_lm\"\nvocab_size = 64\nn_embd = 8\ncontext = 2\nhidden = 16\n"
                             "[data]\nuse = \"stateless_data\"\n"
                             "[optimizer]\nuse = \"adamw\"\n"
                             "[[trackers]]\nuse = \"console\"\n"
                             "[checkpoint]\nevery = 10\n";
  const auto r = run_host("run " + manifest.string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto inspect = run_host("checkpoint inspect " + (ckpt_dir(dir) / "step-10").string() + " --json");
  REQUIRE_MESSAGE(inspect.code == 0, inspect.err);
  std::set<std::string> names;
  const nlohmann::json listed = nlohmann::json::parse(inspect.out);
  for (const auto& t : listed.at("tensors")) names.insert(t.at("name").get<std::string>());
  CHECK(names.count("data/rank0") == 1);  // the host's record of each rank's position, empty here
  for (const auto& name : names) CHECK_MESSAGE(name.rfind("trackers[", 0) != 0, name);
  const auto resumed = run_host("run " + manifest.string() + " --set run.steps=12");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  CHECK(resumed.err.find("dataset stateless_data keeps no position") != std::string::npos);
}
