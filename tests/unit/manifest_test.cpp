// Manifest loading: extends, --set overrides and top-level validation.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "base/failure.hpp"
#include "config/manifest.hpp"
#include "config/toml_guard.hpp"
#include "run_host.hpp"

using namespace loom;
namespace fs = std::filesystem;

namespace {
fs::path write(const fs::path& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}
std::string failure_of(const fs::path& path, const std::vector<std::string>& sets = {}) {
  try {
    load_manifest(path, sets);
  } catch (const Failure& f) {
    CHECK(f.code() == ExitCode::usage);
    return f.what();
  }
  return "";
}
}  // namespace

TEST_CASE("extends merges tables key by key; the child wins") {
  const fs::path dir = loom_test::tmp_dir("manifest-extends");
  write(dir, "base.toml", "[run]\nsteps = 5\nseed = 1\n[optimizer]\nuse = \"sgd\"\nlr = 0.5\n");
  const fs::path child = write(dir, "child.toml", "extends = \"base.toml\"\n[run]\nsteps = 7\n");
  const Manifest m = load_manifest(child, {});
  CHECK(m.root["run"]["steps"].value<int64_t>() == 7);
  CHECK(m.root["run"]["seed"].value<int64_t>() == 1);
  CHECK(m.root["optimizer"]["lr"].value<double>() == 0.5);
  CHECK(!m.root.contains("extends"));
}

TEST_CASE("extends replaces arrays such as [[trackers]] as a whole; a base without them keeps its own") {
  const fs::path dir = loom_test::tmp_dir("manifest-extends-arrays");
  write(dir, "base.toml",
        "[[trackers]]\nuse = \"console\"\n[[trackers]]\nuse = \"jsonl\"\n[[hooks]]\nuse = \"nan_guard\"\n");
  const fs::path child = write(dir, "child.toml", "extends = \"base.toml\"\n[[trackers]]\nuse = \"csv\"\n");
  const Manifest m = load_manifest(child, {});
  const toml::array* trackers = m.root["trackers"].as_array();
  REQUIRE(trackers != nullptr);
  CHECK(trackers->size() == 1);
  CHECK(m.root["trackers"][0]["use"].value<std::string>() == "csv");
  CHECK(m.root["hooks"][0]["use"].value<std::string>() == "nan_guard");  // not named by the child: kept
}

TEST_CASE("extends cycles are reported") {
  const fs::path dir = loom_test::tmp_dir("manifest-cycle");
  write(dir, "a.toml", "extends = \"b.toml\"\n");
  const fs::path b = write(dir, "b.toml", "extends = \"a.toml\"\n");
  CHECK(failure_of(b).find("extends cycle") != std::string::npos);
}

TEST_CASE("--set overrides values with TOML types, bare strings and array indexes") {
  const fs::path dir = loom_test::tmp_dir("manifest-set");
  const fs::path m = write(dir, "m.toml", "[run]\nsteps = 5\n[[trackers]]\nuse = \"console\"\n");
  const Manifest out = load_manifest(m, {"run.steps=50", "optimizer.lr=1e-3", "run.name=abc", "trackers.0.use=jsonl"});
  CHECK(out.root["run"]["steps"].value<int64_t>() == 50);
  CHECK(out.root["optimizer"]["lr"].value<double>() == doctest::Approx(1e-3));
  CHECK(out.root["run"]["name"].value<std::string>() == "abc");
  CHECK(out.root["trackers"][0]["use"].value<std::string>() == "jsonl");
  CHECK(failure_of(m, {"steps"}).find("expected KEY=VALUE") != std::string::npos);
  CHECK(failure_of(m, {"trackers.3.use=x"}).find("past the end") != std::string::npos);
}

TEST_CASE("syntax errors and unknown tables name file, line and column") {
  const fs::path dir = loom_test::tmp_dir("manifest-errors");
  const fs::path bad = write(dir, "bad.toml", "[run]\nsteps = = 3\n");
  const std::string syntax = failure_of(bad);
  CHECK(syntax.find("bad.toml:2:") != std::string::npos);
  CHECK(syntax.find("TOML syntax error") != std::string::npos);
  const fs::path unknown = write(dir, "unknown.toml", "[optimiser]\nuse = \"sgd\"\n");
  const std::string m = failure_of(unknown);
  CHECK(m.find("unknown.toml:1:") != std::string::npos);
  CHECK(m.find("did you mean \"optimizer\"") != std::string::npos);
  CHECK(failure_of(dir / "nope.toml").find("manifest not found") != std::string::npos);
}

TEST_CASE("text that trips toml++ 3.3.0's unreachable whitespace branch is refused before it parses") {
  // U+0405 (Cyrillic DZE), U+00E9 (e acute): both inside the code points the bug covers.
  const std::string dze = "\xD0\x85", e_acute = "\xC3\xA9";
  CHECK(toml_unsafe_character("name = \"caf" + e_acute + "\" # caf" + e_acute + "\n").empty());
  CHECK(toml_unsafe_character("a = '''" + dze + "'''\nb = \"\"\"x\\\\" + dze + "\"\"\"\n").empty());
  // Outside strings: refused as the syntax error it is, without toml++ ever seeing the character.
  CHECK(toml_unsafe_character("steps = " + dze + "10\n").rfind("1:9: TOML syntax error: ", 0) == 0);
  // A string opened where no value can start (the fuzzer's second find): refused the same way.
  CHECK(toml_unsafe_character("uxts =+\"\x1d" "4+++\xC4\x9Axter").find("TOML syntax error") != std::string::npos);
  CHECK(toml_unsafe_character("x = \"\"\"a\\\n  " + dze + "\"\"\"").find("2:3: the character U+0405 follows a "
                                                                      "line-ending backslash") == 0);
  // The fuzzer's input: a one-line usage refusal naming the file and position, not undefined behaviour.
  const fs::path dir = loom_test::tmp_dir("manifest-toml-guard");
  const fs::path bad = write(dir, "m.toml", "[run]\nsteps = " + dze + "10\n");
  CHECK(failure_of(bad).rfind(bad.string() + ":2:9: TOML syntax error: ", 0) == 0);
}
