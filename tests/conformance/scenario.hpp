// scenario.hpp: helpers shared by the conformance and bad_input suites. Each test writes a
// small manifest into its own temp folder and runs the real host binary on it with a pinned
// plugin search path: the scenario's folder of test plugins (LOOM_TEST_PLUGIN_DIR/<name>) plus
// the default folder of real plugins, which the host always searches.
#pragma once

#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "run_host.hpp"

namespace loom_test {

namespace fs = std::filesystem;

// Folder of one scenario's test plugins, e.g. test_plugins("major2").
inline std::string test_plugins(const std::string& scenario) {
  return std::string(LOOM_TEST_PLUGIN_DIR) + "/" + scenario;
}

// One plugin file of a scenario, e.g. test_plugin_file("major2", "major2").
inline std::string test_plugin_file(const std::string& scenario, const std::string& stem) {
  return test_plugins(scenario) + "/" + stem + ".so";
}

// Runs the host with LOOM_PLUGIN_PATH set to exactly plugin_path (empty: none), so an
// inherited environment never changes what a test sees.
inline Result host(const std::string& args, const std::string& plugin_path = "") {
  return run_host(args, "LOOM_PLUGIN_PATH='" + plugin_path + "'");
}

// A TOML literal string; test paths never contain a single quote.
inline std::string lit(const std::string& s) { return "'" + s + "'"; }

// [run] for a 3-step CPU run writing to dir/runs/t, plus the real tiny model, data and SGD.
// No trackers or hooks: callers append their own (the default console tracker is not wanted).
inline std::string base_manifest(const fs::path& dir, int steps = 3) {
  std::ostringstream m;
  m << "[run]\nname = \"t\"\ndir = " << lit((dir / "runs").string()) << "\nsteps = " << steps
    << "\nlog_every = 1\nseed = 1\n\n"
    << "[model]\nuse = \"mlp_lm\"\nn_embd = 8\ncontext = 2\nhidden = 16\n\n"
    << "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\n\n"
    << "[optimizer]\nuse = \"sgd\"\nlr = 0.1\n\n";
  return m.str();
}

inline std::string plugins_table(std::initializer_list<std::string> dirs) {
  std::string out = "[plugins]\npaths = [";
  bool first = true;
  for (const auto& d : dirs) {
    out += (first ? "" : ", ") + lit(d);
    first = false;
  }
  return out + "]\n\n";
}

inline fs::path write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return path;
}

// The run directory base_manifest points at.
inline fs::path run_dir(const fs::path& dir) { return dir / "runs" / "t"; }

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline int count_lines_starting(const std::string& text, const std::string& prefix) {
  int n = 0;
  for (const auto& line : lines_of(text)) n += line.rfind(prefix, 0) == 0;
  return n;
}


}  // namespace loom_test
