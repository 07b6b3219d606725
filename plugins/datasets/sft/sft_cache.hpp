// sft_cache.hpp: instruction data tokenized once, in parallel, into a cache file keyed by the
// data, the tokenizer, the chat template and every option that changes the tokens. A resumed
// run or a second run with the same key reads the file instead of tokenizing again.
//
// File (little-endian): "LOOMSFT1", u32 version (2), u32 0, then u64 counts (samples, tokens,
// lines, bad_lines, too_long, no_trainable, truncated), u64 offsets[samples + 1], i32
// ids[tokens], u8 trained[tokens], u64 XXH64 of all before it. Written to a temporary name and
// renamed, so a reader sees all or nothing; read back with every size, offset, id and flag
// checked and the checksum compared, else tokenized again.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sft_encode.hpp"

namespace loom::sft {

struct DataStats {
  uint64_t lines = 0, bad_lines = 0, too_long = 0, no_trainable = 0, truncated = 0;
};

struct TokenizedData {
  std::vector<uint64_t> offsets{0};  // sample i is tokens [offsets[i], offsets[i + 1])
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;
  DataStats stats;
  size_t samples() const { return offsets.size() - 1; }
};

struct BuildInputs {
  std::vector<std::string> files;  // .jsonl files, in order
  const tok::Tokenizer* tokenizer = nullptr;
  std::string tokenizer_identity;  // bytes that change when the tokenizer does (its files)
  RenderFn render;                 // empty: no chat template
  std::string template_source;
  RecordFormat format;
  EncodeOptions encode;
  bool skip_bad_lines = false;
  unsigned threads = 1;
};

using LogFn = std::function<void(const std::string&)>;

// The cache file name for these inputs (hashes the data files' bytes).
std::string cache_key(const BuildInputs& inputs);

// Reads DIR/KEY.sft when it is there and whole; otherwise tokenizes and writes it. Throws
// std::invalid_argument for bad data (a bad line with skip_bad_lines off, no sample left) and
// std::runtime_error for I/O failures.
TokenizedData load_or_build(const BuildInputs& inputs, const std::string& cache_dir, const LogFn& log);

}  // namespace loom::sft
