// conformance_test.cpp: docs/design.md "The C ABI" rules 2, 3, 4, 6, 7, 8 and 10, proved by running
// the real host binary on small manifests against purpose-built plugins (plugins/*, built into
// test-plugins/<scenario>/). Every plugin's top comment says what it proves.
#include <doctest/doctest.h>
#include <loom/core.h>

#include <nlohmann/json.hpp>

#include <string>

#include "scenario.hpp"

using namespace loom_test;

namespace {

const std::string kHostAbi = std::to_string(LOOM_ABI_MAJOR) + "." + std::to_string(LOOM_ABI_MINOR);

// The host's own torch fingerprint, as `host plugins --json` reports it.
std::string host_fingerprint() {
  const Result r = host("plugins --json");
  REQUIRE(r.code == 0);
  const auto json = nlohmann::json::parse(r.out);
  const std::string fp = json.at("host_torch").get<std::string>();
  REQUIRE(fp.rfind("libtorch ", 0) == 0);
  return fp;
}

// Checks a refusal: the exit code, and stderr is exactly one "error: " line.
void check_one_error_line(const Result& r, int code) {
  CAPTURE(r.err);
  CHECK(r.code == code);
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.rfind("error: ", 0) == 0);
}

}  // namespace

// The component a manifest asks for that only a refused plugin could have offered.
const std::string kWantsMissing = " --set 'optimizer.use=\"major2_optimizer\"'";

TEST_CASE("rule 2: a plugin with another ABI major is refused, naming both versions and the file") {
  const auto dir = tmp_dir("conformance-major2");
  const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("major2")}));
  const Result r = host("run " + manifest.string() + kWantsMissing);
  check_one_error_line(r, 3);
  CHECK(contains(r.err, test_plugin_file("major2", "major2")));
  CHECK(contains(r.err, std::to_string(LOOM_ABI_MAJOR + 1) + ".3"));  // the plugin's version
  CHECK(contains(r.err, kHostAbi));                                     // the host's version
  CHECK(contains(r.err, "rebuild"));
  CHECK_FALSE(fs::exists(run_dir(dir)));  // refused before anything ran
}

TEST_CASE("rule 2: the same plugin found through LOOM_PLUGIN_PATH is refused the same way") {
  const auto dir = tmp_dir("conformance-major2-env");
  const auto manifest = write_file(dir / "m.toml", base_manifest(dir));
  const Result r = host("run " + manifest.string() + kWantsMissing, test_plugins("major2"));
  check_one_error_line(r, 3);
  CHECK(contains(r.err, test_plugin_file("major2", "major2")));
  CHECK(contains(r.err, std::to_string(LOOM_ABI_MAJOR + 1) + ".3"));
}

TEST_CASE("rule 7: a plugin with another torch fingerprint is refused, naming both fingerprints") {
  const auto dir = tmp_dir("conformance-fingerprint");
  const std::string ours = host_fingerprint();
  const std::string theirs = "libtorch 0.0.0-conformance; cxx11abi 0; cuda none";
  REQUIRE(ours != theirs);
  const auto manifest =
      write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("fingerprint")}));
  const Result r = host("run " + manifest.string() + " --set 'optimizer.use=\"wrong_torch_sgd\"'");
  check_one_error_line(r, 3);
  CHECK(contains(r.err, test_plugin_file("fingerprint", "wrong_fingerprint")));
  CHECK(contains(r.err, "\"" + theirs + "\""));
  CHECK(contains(r.err, "\"" + ours + "\""));
  CHECK_FALSE(fs::exists(run_dir(dir)));
}

TEST_CASE("a refused plugin the manifest does not need is one warning line, and the run goes on") {
  for (const char* scenario : {"major2", "fingerprint"}) {
    CAPTURE(scenario);
    const auto dir = tmp_dir(std::string("conformance-unneeded-") + scenario);
    const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins(scenario)}));
    const Result r = host("run " + manifest.string());
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(count_lines_starting(r.err, "warning: skipped a plugin this manifest does not need: ") == 1);
    CHECK(contains(r.err, test_plugins(scenario)));
  }
}

TEST_CASE("an optimizer that declares no lr is refused (exit 3) instead of training at lr 1.0") {
  const auto dir = tmp_dir("conformance-no-lr");
  std::string text = base_manifest(dir) + plugins_table({test_plugins("no_lr")});
  const std::string sgd = "[optimizer]\nuse = \"sgd\"\nlr = 0.1\n";
  REQUIRE(text.find(sgd) != std::string::npos);
  text.replace(text.find(sgd), sgd.size(), "[optimizer]\nuse = \"no_lr\"\n");
  const auto manifest = write_file(dir / "m.toml", text);
  const Result r = host("run " + manifest.string());
  check_one_error_line(r, 3);
  CHECK(contains(r.err, "declares no float option \"lr\""));
  CHECK(contains(r.err, test_plugin_file("no_lr", "no_lr")));
  CHECK_FALSE(fs::exists(run_dir(dir)));
}

TEST_CASE("rule 3: components built with SMALLER structs load and work in a real run") {
  const auto dir = tmp_dir("conformance-small-struct");
  const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("small_struct")}) +
                                                       "[[trackers]]\nuse = \"small_tracker\"\n\n"
                                                       "[[hooks]]\nuse = \"small_hook\"\nstop_after = 2\n");
  const Result r = host("run " + manifest.string());
  CAPTURE(r.err);
  REQUIRE(r.code == 0);

  // The tracker (vtable without `note`) logged every step that ran, and nothing else was
  // called: the poison word behind its short vtable never fired.
  const std::string tracker = read_file(run_dir(dir) / "small_tracker.txt");
  CAPTURE(tracker);
  const auto lines = lines_of(tracker);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].rfind("small_tracker step=1 loss=", 0) == 0);
  CHECK(lines[1].rfind("small_tracker step=2 loss=", 0) == 0);
  CHECK_FALSE(contains(tracker, "POISON"));

  // The hook wrote request_stop through its short loom_control: the 3-step run ended after 2.
  CHECK(read_file(run_dir(dir) / "small_hook.txt") == "small_hook train_end step=2 total_steps=3\n");
}

TEST_CASE("rule 3: a plugin built with LARGER structs (info, component, vtable, option specs) loads and works") {
  const auto dir = tmp_dir("conformance-large-struct");
  const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("large_struct")}) +
                                                       "[[trackers]]\nuse = \"large_tracker\"\ntag = \"big-ok\"\n"
                                                       "verbose = true\n");
  const Result r = host("run " + manifest.string());
  CAPTURE(r.err);
  REQUIRE(r.code == 0);

  // Options 2..5 sit at the plugin's stride, not the host's sizeof: their values and
  // defaults (repeat 2, scale 1.5) arrive intact.
  const std::string out = read_file(run_dir(dir) / "large_tracker.txt");
  CAPTURE(out);
  const auto lines = lines_of(out);
  REQUIRE(lines.size() == 6);  // 3 steps x repeat 2
  for (size_t i = 0; i < lines.size(); ++i)
    CHECK(lines[i] == "tag=big-ok step=" + std::to_string(i / 2 + 1) + " copy=" + std::to_string(i % 2) +
                          " scale=1.5 verbose=1");
  CHECK_FALSE(contains(out, "POISON"));

  // The resolved manifest records the defaults read from the larger specs.
  const std::string resolved = read_file(run_dir(dir) / "manifest.toml");
  CAPTURE(resolved);
  CHECK(contains(resolved, "repeat = 2"));
  CHECK(contains(resolved, "scale = 1.5"));
  CHECK((contains(resolved, "path = \"large_tracker.txt\"") || contains(resolved, "path = 'large_tracker.txt'")));
}

TEST_CASE("rule 3 and 9: describe shows every option of the LARGER-struct plugin with its default and doc") {
  const Result d = host("describe large_tracker", test_plugins("large_struct"));
  CAPTURE(d.err);
  REQUIRE(d.code == 0);
  CAPTURE(d.out);
  for (const char* needle :
       {"large_tracker (tracker)", "File inside the run directory.", "Text written on every line.",
        "Lines written per log call.", "A number echoed on every line.", "A flag echoed on every line.",
        "untagged", "1.5"})
    CHECK(contains(d.out, needle));
}

TEST_CASE("rule 2: a plugin with a NEWER minor version is accepted and reported as such") {
  const Result p = host("plugins --json", test_plugins("large_struct"));
  REQUIRE(p.code == 0);
  bool found = false;
  const auto json = nlohmann::json::parse(p.out);
  for (const auto& plugin : json.at("plugins"))
    if (plugin.at("file") == test_plugin_file("large_struct", "large_struct")) {
      found = true;
      CHECK_FALSE(plugin.contains("error"));
      CHECK(plugin.at("abi") == std::to_string(LOOM_ABI_MAJOR) + "." + std::to_string(LOOM_ABI_MINOR + 1));
    }
  CHECK(found);
}

TEST_CASE("rule 4: a callback that throws ends the run with exit 1 and one error line naming file, component, message") {
  const auto dir = tmp_dir("conformance-throws");
  const std::string file = test_plugin_file("throws", "throws");

  SUBCASE("std::exception from a required tracker's log") {
    const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("throws")}) +
                                                         "[[trackers]]\nuse = \"throwing_tracker\"\nrequired = true\n");
    const Result r = host("run " + manifest.string());
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(count_lines_starting(r.err, "error: ") == 1);
    CHECK(count_lines_starting(r.err, "error") == 1);
    const std::string last = lines_of(r.err).back();
    CHECK(last.rfind("error: ", 0) == 0);
    CHECK(contains(last, file));
    CHECK(contains(last, "throwing_tracker"));
    CHECK(contains(last, "[trackers[0]]"));
    CHECK(contains(last, "throwing_tracker exploded at step 2"));
    CHECK_FALSE(contains(r.err, "terminate"));
  }
  SUBCASE("a tracker that is not required only warns, and the run completes") {
    const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("throws")}) +
                                                         "[[trackers]]\nuse = \"throwing_tracker\"\n");
    const Result r = host("run " + manifest.string());
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(count_lines_starting(r.err, "error") == 0);
    CHECK(count_lines_starting(r.err, "warning: ") == 1);  // once: the tracker is then off
    CHECK(contains(r.err, "throwing_tracker exploded at step 2"));
    CHECK(contains(r.err, "required = true"));
    CHECK(contains(r.err, "done: 3 steps"));
  }
  SUBCASE("a non-std exception from a hook's on_event") {
    const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("throws")}) +
                                                         "[[hooks]]\nuse = \"throwing_hook\"\n");
    const Result r = host("run " + manifest.string());
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(count_lines_starting(r.err, "error") == 1);
    const std::string last = lines_of(r.err).back();
    CHECK(last.rfind("error: ", 0) == 0);
    CHECK(contains(last, file));
    CHECK(contains(last, "throwing_hook"));
    CHECK(contains(last, "unknown C++ exception"));
    CHECK_FALSE(contains(r.err, "terminate"));
  }
}

TEST_CASE("rules 6 and 10: a plugin written in pure C99 loads and drives a real run") {
  const auto dir = tmp_dir("conformance-pure-c");
  // Found through LOOM_PLUGIN_PATH this time; jsonl (also pure C) records the lr.
  const auto manifest = write_file(dir / "m.toml", base_manifest(dir) +
                                                       "[schedule]\nuse = \"inverse_step\"\nscale = 0.5\n\n"
                                                       "[[trackers]]\nuse = \"jsonl\"\n");
  const Result r = host("run " + manifest.string(), test_plugins("pure_c"));
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const auto lines = lines_of(read_file(run_dir(dir) / "metrics.jsonl"));
  REQUIRE(lines.size() == 3);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto m = nlohmann::json::parse(lines[i]);
    const int step = static_cast<int>(i) + 1;
    CHECK(m.at("step") == step);
    CHECK(m.at("lr").get<double>() == doctest::Approx(0.1 * 0.5 / step).epsilon(1e-12));
  }
}

TEST_CASE("rule 8: two files registering one component name are refused, naming both files") {
  const auto dir = tmp_dir("conformance-duplicate");
  const auto manifest = write_file(dir / "m.toml", base_manifest(dir) + plugins_table({test_plugins("duplicate")}));
  const Result r = host("run " + manifest.string());
  check_one_error_line(r, 3);
  CHECK(contains(r.err, "dup_tracker"));
  CHECK(contains(r.err, test_plugin_file("duplicate", "dup_a")));
  CHECK(contains(r.err, test_plugin_file("duplicate", "dup_b")));
  CHECK_FALSE(fs::exists(run_dir(dir)));
}

TEST_CASE("host plugins lists refused plugins with their reason and keeps listing the others") {
  const std::string major2 = test_plugin_file("major2", "major2");
  const std::string wrong_fp = test_plugin_file("fingerprint", "wrong_fingerprint");
  const std::string path = test_plugins("major2") + ":" + test_plugins("fingerprint") + ":" + test_plugins("pure_c");

  SUBCASE("text") {
    const Result r = host("plugins", path);
    CAPTURE(r.err);
    CAPTURE(r.out);
    CHECK(r.code == 0);
    CHECK(contains(r.out, "FAILED " + major2 + "\n"));
    CHECK(contains(r.out, "FAILED " + wrong_fp + "\n"));
    CHECK(contains(r.out, "incompatible with host ABI " + kHostAbi));
    CHECK(contains(r.out, "libtorch 0.0.0-conformance"));
    // Everything after the failures still loaded: a test plugin and the real ones.
    for (const char* name : {"inverse_step", "mlp_lm", "synthetic", "sgd", "adamw", "constant", "warmup_cosine",
                             "console", "jsonl", "nan_guard"})
      CHECK(contains(r.out, std::string(" ") + name + " "));
  }
  SUBCASE("--json is valid JSON with the same facts") {
    const Result r = host("plugins --json", path);
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    nlohmann::json json;
    REQUIRE_NOTHROW(json = nlohmann::json::parse(r.out));
    CHECK(json.at("host_abi") == kHostAbi);
    bool env_origin = false, default_origin = false;
    for (const auto& d : json.at("search_path")) {
      env_origin |= d.at("origin") == "LOOM_PLUGIN_PATH";
      default_origin |= d.at("origin") == "default";
    }
    CHECK(env_origin);
    CHECK(default_origin);
    int failed = 0, loaded = 0;
    bool saw_major2 = false, saw_fp = false, saw_adamw = false;
    for (const auto& p : json.at("plugins")) {
      const std::string file = p.at("file");
      if (p.contains("error")) {
        ++failed;
        const std::string error = p.at("error");
        if (file == major2) saw_major2 = contains(error, std::to_string(LOOM_ABI_MAJOR + 1) + ".3");
        if (file == wrong_fp) saw_fp = contains(error, "libtorch 0.0.0-conformance");
        CHECK(p.at("components").empty());
      } else {
        ++loaded;
        CHECK_FALSE(p.at("components").empty());
        for (const auto& c : p.at("components"))
          if (c.at("name") == "adamw") saw_adamw = c.at("kind") == "optimizer" && p.at("torch") != "torch-free";
      }
    }
    CHECK(failed == 2);
    CHECK(loaded >= 10);  // pure_c plus the nine real plugins
    CHECK(saw_major2);
    CHECK(saw_fp);
    CHECK(saw_adamw);
  }
}
