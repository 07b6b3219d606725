// npm_cache.hpp: tests that compare against files or JavaScript references from npm fetch them
// through tools/npm-cache (into the git-ignored .cache/npm). Where npm or its registry cannot be
// reached, the whole test exits 77, which ctest reports as skipped.
#pragma once

#include <cstdlib>
#include <iostream>
#include <string>

#include "run_host.hpp"

namespace loom_test {

// Runs `tools/npm-cache ARGS` and returns the folder it prints; exits 77 (skipped) or 1.
inline std::string npm_cache(const std::string& args) {
  const auto r = run_shell(std::string(LOOM_SOURCE_DIR) + "/tools/npm-cache " + args);
  if (r.code == 77) {
    std::cout << "SKIPPED: " << r.err;
    std::exit(77);
  }
  if (r.code != 0) {
    std::cerr << "tools/npm-cache " << args << " failed: " << r.err;
    std::exit(1);
  }
  return r.out.substr(0, r.out.find('\n'));
}

}  // namespace loom_test
