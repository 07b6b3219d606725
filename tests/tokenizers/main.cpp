// main.cpp: fetches the npm files once, then runs the doctest cases; exit code 77 (skipped) when
// npm or its registry cannot be reached, so a machine without network says so instead of failing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

#include "npm_files.hpp"
#include "run_host.hpp"

namespace loom::test {

NpmFiles& npm_files() {
  static NpmFiles files;
  return files;
}

namespace {

// Runs tools/npm-cache; returns its one line of output, or exits 77/1 for the whole test.
std::string npm_cache(const std::string& args) {
  const auto r = loom_test::run_shell(std::string(LOOM_SOURCE_DIR) + "/tools/npm-cache " + args);
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

}  // namespace

}  // namespace loom::test

int main(int argc, char** argv) {
  auto& files = loom::test::npm_files();
  for (const auto& [name, package] : loom::test::tokenizer_packages())
    files.tokenizer_dirs[name] = loom::test::npm_cache("files " + package) + "/models";
  files.modules = loom::test::npm_cache(std::string("modules ") + loom::test::kReferenceModules);
  doctest::Context context(argc, argv);
  return context.run();
}
