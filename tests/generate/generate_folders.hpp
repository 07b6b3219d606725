// generate_folders.hpp: tiny random Hugging Face folders for the generate tests, written by the
// independent Python reference (tests/hf_models/hf_reference.py) with the real Qwen3 tokenizer
// files (../shared/tokenizers/qwen3, tokenizer_files.hpp) beside the weights.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include "run_host.hpp"
#include "tokenizer_files.hpp"

namespace loom_test {

// A tiny random folder of `arch` with a vocabulary of `vocab` (0: the reference's own 64 ids; the
// tokenizer's ids above it are then not asked for) and `positions` positions (0: the reference's 64).
// Written once a process: the cases only read it (what they write goes beside it), and a Qwen3
// vocabulary's folder takes the reference seconds to write.
inline std::string model_folder_with_vocab(const std::string& arch, int64_t vocab, int64_t positions = 0) {
  const std::string key = "generate_" + arch + "_" + std::to_string(vocab) + "_" + std::to_string(positions);
  static std::map<std::string, std::string> written;
  if (const auto found = written.find(key); found != written.end()) return found->second;
  const auto dir = tmp_dir(key) / "model";
  std::string command = std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/tests/hf_models/hf_reference.py write --arch " +
                        arch + " --out " + dir.string();
  if (vocab) command += " --vocab-size " + std::to_string(vocab);
  if (positions) command += " --max-positions " + std::to_string(positions);
  const auto r = run_shell(command);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(std::filesystem::path(tokenizer_dir("qwen3")) / name, dir / name);
  return written[key] = dir.string();
}

// ... with Qwen3's whole vocabulary (151669 ids).
inline std::string model_folder(const std::string& arch, int64_t positions = 0) {
  return model_folder_with_vocab(arch, 151669, positions);
}

}  // namespace loom_test
