// run_host.hpp: runs the real `host` binary (or any command) for end-to-end tests and
// captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace loom_test {

struct Result {
  int code = -1;
  std::string out, err;
};

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::filesystem::path tmp_dir(const std::string& name) {
  const auto dir = std::filesystem::path(LOOM_TEST_TMP) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `command` through the shell; env_prefix such as "LOOM_PLUGIN_PATH=/x " goes first.
inline Result run_shell(const std::string& command) {
  static int counter = 0;
  const auto dir = std::filesystem::path(LOOM_TEST_TMP) / "capture";
  std::filesystem::create_directories(dir);
  const std::string base = (dir / (std::to_string(::getpid()) + "-" + std::to_string(counter++))).string();
  const std::string full = command + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(full.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(base + ".out");
  r.err = read_file(base + ".err");
  return r;
}

// Runs the host with arguments; env_prefix like "LOOM_PLUGIN_PATH=/dir" (may be empty).
inline Result run_host(const std::string& args, const std::string& env_prefix = "") {
  return run_shell(env_prefix + (env_prefix.empty() ? "" : " ") + LOOM_HOST_BIN + " " + args);
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Number of lines in text (a trailing newline does not start a new line).
inline int line_count(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

}  // namespace loom_test
