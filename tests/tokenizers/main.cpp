// main.cpp: fetches the npm files once, then runs the doctest cases; exit code 77 (skipped) when
// npm or its registry cannot be reached, so a machine without network says so instead of failing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "npm_cache.hpp"
#include "npm_files.hpp"

namespace loom::test {

NpmFiles& npm_files() {
  static NpmFiles files;
  return files;
}

}  // namespace loom::test

int main(int argc, char** argv) {
  auto& files = loom::test::npm_files();
  for (const auto& [name, package] : loom::test::tokenizer_packages())
    files.tokenizer_dirs[name] = loom_test::npm_cache("files " + package) + "/models";
  files.modules = loom_test::npm_cache(std::string("modules ") + loom::test::kReferenceModules);
  doctest::Context context(argc, argv);
  return context.run();
}
