// bad_input_test.cpp: every bad input ends with its documented exit code (2: bad manifest or
// usage, 3: plugin load) and exactly ONE line on stderr, starting with "error: ", that names
// the file and line:col where there is one, the table and component, and the fix. Positions
// are computed from the manifest text each test writes, so they are exact.
#include <doctest/doctest.h>

#include <string>

#include "scenario.hpp"

using namespace loom_test;

namespace {

// Checks exit code, stdout empty, stderr one "error: " line; returns that line.
std::string one_error(const Result& r, int code) {
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.code == code);
  CHECK(r.out.empty());
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.rfind("error: ", 0) == 0);
  CHECK(r.err.back() == '\n');
  return r.err.substr(0, r.err.find('\n'));
}

// "LINE:COL" (1-based) where needle first occurs in text.
std::string position(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  REQUIRE_MESSAGE(at != std::string::npos, needle);
  const size_t line_start = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  int line = 1;
  for (size_t i = 0; i < at; ++i) line += text[i] == '\n';
  return std::to_string(line) + ":" + std::to_string(at - line_start + 1);
}

struct Case {
  fs::path dir, manifest;
  std::string text;
};

// Writes base_manifest + extra into a fresh folder named after the test.
Case manifest(const std::string& name, const std::string& extra, bool with_base = true) {
  Case c;
  c.dir = tmp_dir("bad-input-" + name);
  c.text = (with_base ? base_manifest(c.dir) : "") + extra;
  c.manifest = write_file(c.dir / "m.toml", c.text);
  return c;
}

}  // namespace

TEST_CASE("the base manifest the cases below break is itself valid") {
  // Guards every case: each failure below comes from the one thing it changes.
  const Case c = manifest("valid", "");
  const Result r = host("validate " + c.manifest.string());
  CAPTURE(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.empty());
}

TEST_CASE("missing manifest file: exit 2, names the path") {
  const auto dir = tmp_dir("bad-input-missing");
  const std::string path = (dir / "nope.toml").string();
  for (const char* command : {"run ", "validate "}) {
    CAPTURE(command);
    const std::string line = one_error(host(command + path), 2);
    CHECK(line == "error: " + path + ": manifest not found; check the path");
  }
}

TEST_CASE("TOML syntax error: exit 2, file:line:col and the fix") {
  const Case c = manifest("toml-syntax", "[run]\nname = \"t\"\nsteps = = 3\n", /*with_base=*/false);
  const std::string line = one_error(host("run " + c.manifest.string()), 2);
  CHECK(line.rfind("error: " + c.manifest.string() + ":3:9: TOML syntax error: ", 0) == 0);
  CHECK(contains(line, "fix the syntax"));
}

TEST_CASE("unknown option key: exit 2, position, component, did-you-mean and where to look") {
  SUBCASE("in a component's table") {
    const Case c = manifest("unknown-option", "momentun = 0.9\n");  // appended to [optimizer]
    const std::string line = one_error(host("run " + c.manifest.string()), 2);
    CHECK(contains(line, c.manifest.string() + ":" + position(c.text, "momentun") + ": "));
    CHECK(contains(line, "[optimizer] sgd"));
    CHECK(contains(line, "unknown option \"momentun\""));
    CHECK(contains(line, "did you mean \"momentum\"?"));
    CHECK(contains(line, "host describe sgd"));
  }
  SUBCASE("in [run]") {
    const Case c = manifest("unknown-run-option", "");
    std::string text = c.text;
    text.replace(text.find("log_every"), 9, "log_evry");
    write_file(c.manifest, text);
    const std::string line = one_error(host("run " + c.manifest.string()), 2);
    CHECK(contains(line, c.manifest.string() + ":" + position(text, "log_evry") + ": [run]"));
    CHECK(contains(line, "did you mean \"log_every\"?"));
  }
}

TEST_CASE("wrong option type: exit 2, file:line:col of the value, expected and actual type") {
  const Case c = manifest("wrong-type", "momentum = \"high\"\n");
  const std::string line = one_error(host("run " + c.manifest.string()), 2);
  CHECK(contains(line, c.manifest.string() + ":" + position(c.text, "\"high\"") + ": "));
  CHECK(contains(line, "[optimizer] sgd"));
  CHECK(contains(line, "option \"momentum\" must be float, not string"));
  CHECK(contains(line, "host describe sgd"));
}

TEST_CASE("wrong option type in a manifest that extends a base: the position is in the file that set it") {
  // The host merges the two files; the bad value must keep its own file:line:col.
  const Case base = manifest("extends-wrong-type", "");
  const std::string child_text = "extends = \"m.toml\"\n\n[optimizer]\nmomentum = \"high\"\n";
  const auto child = write_file(base.dir / "child.toml", child_text);
  const std::string line = one_error(host("run " + child.string()), 2);
  CHECK(contains(line, child.string() + ":" + position(child_text, "\"high\"") + ": "));
  CHECK(contains(line, "[optimizer] sgd"));
  CHECK(contains(line, "option \"momentum\" must be float, not string"));
}

TEST_CASE("wrong option type from --set: the message names the --set, not a file") {
  const Case c = manifest("set-wrong-type", "");
  const std::string line = one_error(host("run " + c.manifest.string() + " --set optimizer.momentum=high"), 2);
  CHECK(line.rfind("error: --set optimizer.momentum: [optimizer] sgd: ", 0) == 0);
  CHECK(contains(line, "option \"momentum\" must be float, not string"));
  CHECK_FALSE(contains(line, "<manifest>"));
}

TEST_CASE("missing required option: exit 2, the table's position, component, option and fix") {
  const Case c = manifest("missing-required",
                          plugins_table({test_plugins("required")}) + "[[trackers]]\nuse = \"needs_target\"\n");
  const std::string line = one_error(host("run " + c.manifest.string()), 2);
  CHECK(contains(line, c.manifest.string() + ":" + position(c.text, "[[trackers]]") + ": "));
  CHECK(contains(line, "[trackers[0]] needs_target"));
  CHECK(contains(line, "missing required option \"target\""));
  CHECK(contains(line, "Where the metrics go"));  // the option's doc
  CHECK(contains(line, "add target = "));
  // Setting it makes the same manifest valid: the option, not something else, was the problem.
  const Result ok = host("validate " + c.manifest.string() + " --set trackers.0.target=out.txt");
  CAPTURE(ok.err);
  CHECK(ok.code == 0);
}

TEST_CASE("unknown component: exit 2, position of use, did-you-mean and what is installed") {
  SUBCASE("misspelled") {
    const Case c = manifest("unknown-component", "[schedule]\nuse = \"warmup_cosin\"\n");
    const std::string line = one_error(host("run " + c.manifest.string()), 2);
    CHECK(contains(line, c.manifest.string() + ":" + position(c.text, "\"warmup_cosin\"") + ": [schedule]"));
    CHECK(contains(line, "no schedule named \"warmup_cosin\""));
    CHECK(contains(line, "did you mean \"warmup_cosine\"?"));
    CHECK(contains(line, "installed: "));
    CHECK(contains(line, "host plugins"));
  }
  SUBCASE("a component of another kind") {
    const Case c = manifest("wrong-kind", "[schedule]\nuse = \"jsonl\"\n");
    const std::string line = one_error(host("run " + c.manifest.string()), 2);
    CHECK(contains(line, c.manifest.string() + ":" + position(c.text, "\"jsonl\"") + ": [schedule]"));
    CHECK(contains(line, "\"jsonl\" is a tracker, not a schedule"));
  }
}

TEST_CASE("missing plugin directory in [plugins] paths: exit 2, names the manifest position and the folder") {
  const Case c = manifest("missing-plugin-dir", plugins_table({test_plugins("required")}));
  std::string text = c.text;
  text.replace(text.find("]\n", text.find("paths")), 1, ", \"no-such-dir\"]");
  write_file(c.manifest, text);
  const std::string line = one_error(host("run " + c.manifest.string()), 2);
  CHECK(contains(line, c.manifest.string() + ":" + position(text, "\"no-such-dir\"") + ": "));
  // Relative entries start at the manifest's folder, and the message shows the result.
  CHECK(contains(line, "plugin directory " + (c.dir / "no-such-dir").string() + " does not exist"));
  CHECK(contains(line, "fix [plugins] paths"));
}

TEST_CASE("duplicate component: exit 3, names the component and both files") {
  const Case c = manifest("duplicate", plugins_table({test_plugins("duplicate")}));
  const std::string line = one_error(host("run " + c.manifest.string()), 3);
  CHECK(contains(line, "duplicate tracker \"dup_tracker\""));
  CHECK(contains(line, test_plugin_file("duplicate", "dup_a")));
  CHECK(contains(line, test_plugin_file("duplicate", "dup_b")));
  CHECK(contains(line, "remove one"));
}

TEST_CASE("unknown top-level table: exit 2, position and did-you-mean") {
  const Case c = manifest("unknown-table", "[optimiser]\nlr = 1.0\n");
  const std::string line = one_error(host("run " + c.manifest.string()), 2);
  CHECK(contains(line, c.manifest.string() + ":" + position(c.text, "optimiser]") + ": "));
  CHECK(contains(line, "unknown table [optimiser]"));
  CHECK(contains(line, "did you mean \"optimizer\"?"));
}

TEST_CASE("bad --set syntax: exit 2, the offending argument and an example") {
  const Case c = manifest("bad-set", "");
  SUBCASE("no '='") {
    const std::string line = one_error(host("run " + c.manifest.string() + " --set run.steps"), 2);
    CHECK(contains(line, "--set run.steps"));
    CHECK(contains(line, "expected KEY=VALUE"));
    CHECK(contains(line, "for example --set "));
  }
  SUBCASE("no table") {
    const std::string line = one_error(host("run " + c.manifest.string() + " --set steps=3"), 2);
    CHECK(contains(line, "--set steps=3"));
    CHECK(contains(line, "KEY needs a table and a name"));
  }
  SUBCASE("the overridden value is validated like the manifest's own") {
    const std::string line = one_error(host("run " + c.manifest.string() + " --set run.steps=many"), 2);
    CHECK(contains(line, "--set run.steps: [run]"));
    CHECK(contains(line, "\"steps\" must be int, not string"));
  }
  CHECK_FALSE(fs::exists(run_dir(c.dir)));
}

TEST_CASE("unknown command: exit 2, lists the commands") {
  const std::string line = one_error(host("frobnicate"), 2);
  CHECK(line == "error: unknown command \"frobnicate\"; commands: run, validate, eval, plugins, describe, export, generate, checkpoint, data, launch");
}

TEST_CASE("run.precision and run.device: exit 2, the --set that named them and the choices") {
  const Case c = manifest("device-precision", "");
  SUBCASE("an unknown precision") {
    const std::string line = one_error(host("run " + c.manifest.string() + " --set run.precision=\\\"fp16\\\""), 2);
    CHECK(contains(line, "--set run.precision: [run] precision = \"fp16\" is not a precision"));
    CHECK(contains(line, "\"fp32\", \"tf32\" or \"bf16\""));
  }
  SUBCASE("an unknown device") {
    const std::string line = one_error(host("run " + c.manifest.string() + " --set run.device=\\\"gpu\\\""), 2);
    CHECK(contains(line, "--set run.device: [run] device = \"gpu\" is not a device"));
  }
  SUBCASE("cuda where there is none (skipped on a machine with a GPU)") {
    const Result r = host("run " + c.manifest.string() + " --set run.device=\\\"cuda:7\\\"");
    if (r.code != 0 && contains(r.err, "GPU(s) are visible")) return;  // a GPU machine with fewer than 8
    const std::string line = one_error(r, 2);
    CHECK(contains(line, "--set run.device: [run] device = \"cuda:7\" but "));
    CHECK(contains(line, "use device = \"cpu\" or \"auto\""));
  }
}

TEST_CASE("run.gpu_memory_gib on the CPU: exit 2 before the run folder is written, naming the device and the fix") {
  const Case c = manifest("gpu-memory-cpu", "");
  const std::string line =
      one_error(host("run " + c.manifest.string() + " --set run.device=\\\"cpu\\\" --set run.gpu_memory_gib=40"), 2);
  CHECK(contains(line, "[run] gpu_memory_gib = 40 caps CUDA's memory, but this run is on cpu"));
  CHECK(contains(line, "set run.device = \"cuda\""));
  CHECK_FALSE(fs::exists(run_dir(c.dir)));
  CHECK(contains(one_error(host("run " + c.manifest.string() + " --set run.gpu_memory_gib=-1"), 2), "gpu_memory_gib"));
}

TEST_CASE("each command takes its own flags: others are refused, and COMMAND --help is that command's") {
  const Case c = manifest("command-flags", "");
  const std::string line = one_error(host("plugins --set run.steps=5"), 2);
  CHECK(contains(line, "plugins: unrecognised option '--set'"));
  CHECK(contains(line, "see host plugins --help"));
  CHECK(contains(one_error(host("validate " + c.manifest.string() + " --json"), 2), "see host validate --help"));
  CHECK(contains(one_error(host("checkpoint inspect"), 2), "usage: host checkpoint inspect DIR [--json]"));
  const Result help = host("run --help");
  CHECK(help.code == 0);
  CHECK(contains(help.out, "usage: host run MANIFEST [--set KEY=VALUE]..."));
  CHECK(contains(help.out, "--set KEY=VALUE"));
  CHECK_FALSE(contains(help.out, "--json"));     // not a flag of run
  CHECK_FALSE(contains(help.out, "commands:"));  // not the global help
  CHECK_FALSE(fs::exists(run_dir(c.dir)));
}

TEST_CASE("NCCL chosen for a multi-rank run is refused before the run folder is written") {
  const Case c = manifest("nccl-preflight", "");
  // Rank 0 of 2 by the launcher's variables; the check fails before any rank is awaited.
  // On the CPU, so that a build with NCCL refuses it too (NCCL moves CUDA tensors only).
  const Result r = run_host("run " + c.manifest.string() +
                                " --set distributed.backend=\\\"nccl\\\" --set run.device=\\\"cpu\\\"",
                            "LOOM_PLUGIN_PATH='' RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=9");
  const std::string line = one_error(r, 2);
  CHECK(contains(line, "[distributed] backend nccl"));
  CHECK_FALSE(fs::exists(run_dir(c.dir)));
}
