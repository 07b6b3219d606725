// token_file_format.hpp: the Loom token file, written by loom-tokenize and read by the
// `token_file` dataset. Header-only, torch-free, SDK-free.
//
// Layout (all integers little-endian):
//
//   offset  size  field
//        0     8  magic        "LOOMTOKS": says this is a Loom token file at all
//        8     4  version      uint32, 1. Bumped when the layout changes; readers refuse others
//       12     4  token_bytes  uint32, bytes per token: 2 = uint16 ids, 4 = uint32 ids
//       16     8  token_count  uint64, number of tokens after the header
//       24     8  reserved     uint64, written as 0, ignored by version-1 readers
//       32     -  tokens       token_count ids of token_bytes each, nothing after them
//
// A reader checks every field against the file's size, so a truncated copy or a file from
// another tool fails at once with a message that says how to re-create it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "data_error.hpp"
#include "little_endian.hpp"

namespace loom::data {

constexpr char kTokenFileMagic[8] = {'L', 'O', 'O', 'M', 'T', 'O', 'K', 'S'};
constexpr uint32_t kTokenFileVersion = 1;
constexpr size_t kTokenFileHeaderBytes = 32;

struct TokenFileHeader {
  uint32_t version = kTokenFileVersion;
  uint32_t token_bytes = 2;  // 2 (uint16) or 4 (uint32)
  uint64_t token_count = 0;
};

// "uint16" / "uint32" for token_bytes 2 / 4.
inline const char* token_dtype_name(uint32_t token_bytes) {
  return token_bytes == 2 ? "uint16" : token_bytes == 4 ? "uint32" : "unknown";
}

// The 32 header bytes for header.
inline std::string encode_token_file_header(const TokenFileHeader& header) {
  std::string out(kTokenFileMagic, sizeof kTokenFileMagic);
  append_le<uint32_t>(out, header.version);
  append_le<uint32_t>(out, header.token_bytes);
  append_le<uint64_t>(out, header.token_count);
  append_le<uint64_t>(out, 0);  // reserved
  return out;
}

// Parses and validates the header of the file at `path` whose total size is file_size bytes;
// `bytes` holds its first min(file_size, 32) bytes. Throws a bad_input DataError naming the
// file and the fix.
inline TokenFileHeader parse_token_file_header(const unsigned char* bytes, uint64_t file_size,
                                               const std::string& path) {
  const std::string remake = "; re-create it with `loom-tokenize INPUT... -o " + path + "`";
  if (file_size < kTokenFileHeaderBytes)
    throw bad_input(path + ": too short to be a Loom token file (" + std::to_string(file_size) +
                    " bytes, the header alone is 32)" + remake);
  if (std::memcmp(bytes, kTokenFileMagic, sizeof kTokenFileMagic) != 0)
    throw bad_input(path + ": not a Loom token file (it does not start with the magic \"LOOMTOKS\")" + remake);
  TokenFileHeader h;
  h.version = load_le<uint32_t>(bytes + 8);
  h.token_bytes = load_le<uint32_t>(bytes + 12);
  h.token_count = load_le<uint64_t>(bytes + 16);
  if (h.version != kTokenFileVersion)
    throw bad_input(path + ": token file version " + std::to_string(h.version) +
                    " is not supported (this build reads version " + std::to_string(kTokenFileVersion) + ")" +
                    remake + " from this build");
  if (h.token_bytes != 2 && h.token_bytes != 4)
    throw bad_input(path + ": " + std::to_string(h.token_bytes) +
                    " bytes per token is not supported (2 = uint16, 4 = uint32)" + remake);
  const uint64_t data_bytes = file_size - kTokenFileHeaderBytes;
  if (data_bytes % h.token_bytes != 0)
    throw bad_input(path + ": the " + std::to_string(data_bytes) + " bytes after the header are not a whole number of " +
                    std::to_string(h.token_bytes) + "-byte tokens; the file is truncated or corrupt" + remake);
  if (data_bytes / h.token_bytes != h.token_count)
    throw bad_input(path + ": the header says " + std::to_string(h.token_count) + " tokens but the file holds " +
                    std::to_string(data_bytes / h.token_bytes) + "; the file is truncated or corrupt" + remake);
  return h;
}

}  // namespace loom::data
