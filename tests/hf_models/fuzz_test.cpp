// fuzz_test.cpp: the safetensors reader and the Hugging Face folder reader take thousands of
// randomly damaged files (bytes flipped, inserted, deleted, truncated; header JSON rewritten)
// and either read them or throw a FormatError; nothing else, and no crash. Deterministic
// seeds, so a failure reproduces.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <filesystem>
#include <fstream>
#include <random>

#include "formats/format_error.hpp"
#include "formats/hf_folder.hpp"
#include "run_host.hpp"
#include "tiny_folder.hpp"
#include "formats/weight_loading.hpp"

namespace fs = std::filesystem;
using namespace loom_test;

namespace {

std::string mutate(std::string bytes, std::mt19937_64& rng) {
  const int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits && !bytes.empty(); ++e) {
    const size_t at = rng() % bytes.size();
    switch (rng() % 6) {
      case 0: bytes[at] = char(rng()); break;                                       // flip a byte
      case 1: bytes.resize(at); break;                                              // truncate
      case 2: bytes.insert(at, 1 + rng() % 16, char(rng())); break;                 // insert
      case 3: bytes.erase(at, 1 + rng() % 16); break;                               // delete
      case 4: bytes[at % std::min<size_t>(bytes.size(), 8)] = char(rng()); break;   // the length field
      default: {                                                                    // a digit in the header
        const size_t digit = bytes.find_first_of("0123456789", 8 + rng() % std::min<size_t>(bytes.size(), 2000));
        if (digit != std::string::npos) bytes[digit] = char('0' + rng() % 10);
      }
    }
  }
  return bytes;
}

// Reads every tensor of the folder into a model-shaped parameter list; returns whether it read.
bool read_folder(const fs::path& dir) {
  try {
    const loom::formats::HfWeightSource source(dir.string());
    std::vector<std::pair<std::string, at::Tensor>> params;
    for (const auto& [name, t] : tiny_llama_tensors()) params.emplace_back(name, at::zeros_like(t));
    loom::formats::LoadRules rules;
    rules.strict = false;
    loom::formats::load_weights(source, params, rules);
    return true;
  } catch (const loom::formats::FormatError&) {
    return false;
  }
}

}  // namespace

TEST_CASE("damaged safetensors files are read or refused, never a crash") {
  const fs::path dir = write_tiny_llama(tmp_dir("hf_fuzz") / "single");
  const std::string original = read_file(dir / "model.safetensors");
  std::mt19937_64 rng(20261125);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::ofstream(dir / "model.safetensors", std::ios::binary | std::ios::trunc) << mutate(original, rng);
    refused += read_folder(dir) ? 0 : 1;
  }
  MESSAGE(refused << " of 2000 damaged files refused");
  CHECK(refused > 1000);  // most damage is caught by the header checks
}

TEST_CASE("damaged index files are read or refused, never a crash") {
  const fs::path dir = write_tiny_llama(tmp_dir("hf_fuzz_index") / "sharded", 3);
  const std::string original = read_file(dir / "model.safetensors.index.json");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << mutate(original, rng);
    read_folder(dir);
  }
  CHECK(true);  // reaching here without a crash is the property
}
