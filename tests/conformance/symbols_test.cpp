// symbols_test.cpp: rules 1 and 6 on the built files. Every plugin (the real ones and the
// conformance ones) exports exactly one defined dynamic symbol, loom_plugin_init; torch-free
// plugins do not link LibTorch at all, torch-linked ones do.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "scenario.hpp"

using namespace loom_test;

namespace {

const std::vector<std::string> kTorchFree = {"synthetic", "token_file", "text",      "constant",    "warmup_cosine",
                                             "console",   "jsonl",      "nan_guard", "safetensors", "sqlite",
                                             "eval",      "early_stop", "csv",       "tensorboard", "sft",
                                             "criteo_tsv",
#ifdef LOOM_TEST_WITH_ARROW
                                             "parquet",  // built only where Apache Arrow was found
#endif
};
const std::vector<std::string> kTorchLinked = {"mlp_lm", "gpt",      "sgd",  "adamw",      "torch_pickle",
                                               "profiler", "dlrm", "sparse_rows"};
// Torch-free on CPU-only LibTorch; linked only when LibTorch has CUDA, for the CUDA caching
// allocator's statistics (libc10_cuda).
const std::vector<std::string> kTorchLinkedWithCuda = {"memory_monitor"};
// Every test plugin the CMakeLists builds; all are torch-free.
const std::vector<std::string> kTestPlugins = {
    "major2/major2",         "fingerprint/wrong_fingerprint", "small_struct/small_struct",
    "large_struct/large_struct", "throws/throws",            "duplicate/dup_a",
    "duplicate/dup_b",       "pure_c/pure_c",                "required/required"};

std::string real_plugin(const std::string& name) { return std::string(LOOM_PLUGIN_DIR) + "/" + name + ".so"; }

// Every .so under dir, recursively.
std::vector<std::string> so_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".so") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> all_plugins() {
  auto out = so_files(LOOM_PLUGIN_DIR);
  for (const auto& f : so_files(LOOM_TEST_PLUGIN_DIR)) out.push_back(f);
  return out;
}

bool links_torch(const std::string& file) {
  const Result r = run_shell("ldd '" + file + "'");
  REQUIRE_MESSAGE(r.code == 0, "ldd failed on " << file << ": " << r.err);
  return contains(r.out, "libtorch") || contains(r.out, "libc10");
}

// Whether the host's LibTorch was built with CUDA.
bool host_has_cuda() {
  const Result r = run_shell(std::string("ldd '") + LOOM_HOST_BIN + "'");
  REQUIRE_MESSAGE(r.code == 0, "ldd failed on the host: " << r.err);
  return contains(r.out, "libc10_cuda") || contains(r.out, "libtorch_cuda");
}

bool listed(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

TEST_CASE("the expected plugin files exist") {
  for (const auto& n : kTorchFree) CHECK_MESSAGE(fs::exists(real_plugin(n)), real_plugin(n));
  for (const auto& n : kTorchLinked) CHECK_MESSAGE(fs::exists(real_plugin(n)), real_plugin(n));
  for (const auto& n : kTorchLinkedWithCuda) CHECK_MESSAGE(fs::exists(real_plugin(n)), real_plugin(n));
  for (const auto& p : kTestPlugins) {
    const std::string f = std::string(LOOM_TEST_PLUGIN_DIR) + "/" + p + ".so";
    CHECK_MESSAGE(fs::exists(f), f);
  }
}

TEST_CASE("rule 1: every plugin exports exactly one defined dynamic symbol, loom_plugin_init") {
  const auto files = all_plugins();
  CHECK(files.size() >= kTorchFree.size() + kTorchLinked.size() + kTorchLinkedWithCuda.size() + kTestPlugins.size());
  for (const auto& f : files) {
    CAPTURE(f);
    const Result r = run_shell("nm -D --defined-only '" + f + "'");
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto lines = lines_of(r.out);
    CAPTURE(r.out);
    REQUIRE(lines.size() == 1);
    // "0000000000001139 T loom_plugin_init": a defined function, globally visible.
    CHECK(lines[0].size() > 19);
    CHECK(lines[0].substr(lines[0].size() - 19) == " T loom_plugin_init");
  }
}

TEST_CASE("every shipped plugin is classified torch-free or torch-linked here") {
  for (const auto& entry : fs::directory_iterator(LOOM_PLUGIN_DIR)) {
    const std::string name = entry.path().stem().string();
    const bool known = listed(kTorchFree, name) || listed(kTorchLinked, name) || listed(kTorchLinkedWithCuda, name);
    CHECK_MESSAGE(known, name << ".so is new: add it to kTorchFree or kTorchLinked");
  }
}

TEST_CASE("rule 6: torch-free plugins do not link LibTorch; torch-linked ones do") {
  for (const auto& n : kTorchFree) {
    CAPTURE(n);
    CHECK_FALSE(links_torch(real_plugin(n)));
  }
  for (const auto& p : kTestPlugins) {
    CAPTURE(p);
    CHECK_FALSE(links_torch(std::string(LOOM_TEST_PLUGIN_DIR) + "/" + p + ".so"));
  }
  for (const auto& n : kTorchLinked) {
    CAPTURE(n);
    CHECK(links_torch(real_plugin(n)));
  }
  const bool cuda = host_has_cuda();
  for (const auto& n : kTorchLinkedWithCuda) {
    CAPTURE(n);
    CAPTURE(cuda);
    CHECK(links_torch(real_plugin(n)) == cuda);
  }
}
