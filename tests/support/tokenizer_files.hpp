// tokenizer_files.hpp: the real tokenizer files (tokenizer.json and tokenizer_config.json of
// Qwen3, Llama 2/3/3.1, Gemma 3, GPT-4o, Mistral Nemo) that tests compare on. They are other
// people's files, never committed: they lie in ../shared/tokenizers/<name> beside the repository,
// or under the folder LOOM_TOKENIZER_FILES names. Without them (a fresh clone) the whole test
// exits 77, which ctest reports as skipped, with the reason in one line.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

namespace loom_test {

// The folder of tokenizer `name`; exits 77 (skipped) when it has no tokenizer.json. Call it from
// main(), before any test case runs, so a missing folder skips the test instead of failing a case.
inline std::string tokenizer_dir(const std::string& name) {
  const char* env = std::getenv("LOOM_TOKENIZER_FILES");
  const bool from_env = env && *env;
  const std::filesystem::path root =
      from_env ? std::filesystem::path(env) : std::filesystem::path(LOOM_SOURCE_DIR) / ".." / "shared" / "tokenizers";
  const std::filesystem::path dir = (root / name).lexically_normal();
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json")) {
    std::cout << "SKIPPED: no real tokenizer files at " << dir.string() << " (put them in ../shared/tokenizers"
              << " beside the repository, or name their folder in LOOM_TOKENIZER_FILES)\n";
    std::exit(77);
  }
  return dir.string();
}

}  // namespace loom_test
