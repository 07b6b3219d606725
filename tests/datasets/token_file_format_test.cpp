// The token file header (plugins/datasets/common/token_file_format.hpp): its exact bytes, and a
// clear refusal, naming the file and how to re-create it, for every way a file can be wrong.
#include <doctest/doctest.h>

#include <string>

#include "plugins/datasets/common/token_file_format.hpp"

using namespace loom::data;

namespace {

// The message parse_token_file_header throws for the given bytes ("" when it accepts them).
std::string refusal(const std::string& bytes, uint64_t file_size) {
  std::string padded = bytes;
  padded.resize(kTokenFileHeaderBytes > bytes.size() ? kTokenFileHeaderBytes : bytes.size());
  try {
    parse_token_file_header(reinterpret_cast<const unsigned char*>(padded.data()), file_size, "data/x.tok");
  } catch (const DataError& e) {
    CHECK(e.kind() == DataError::Kind::bad_input);
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string header(uint32_t version, uint32_t token_bytes, uint64_t count) {
  TokenFileHeader h;
  h.version = version;
  h.token_bytes = token_bytes;
  h.token_count = count;
  return encode_token_file_header(h);
}

}  // namespace

TEST_CASE("the header is 32 little-endian bytes: magic, version, token size, count, reserved") {
  const std::string h = header(1, 4, 0x0102030405060708ull);
  const std::string expected("LOOMTOKS"
                             "\x01\x00\x00\x00"
                             "\x04\x00\x00\x00"
                             "\x08\x07\x06\x05\x04\x03\x02\x01"
                             "\x00\x00\x00\x00\x00\x00\x00\x00",
                             32);
  CHECK(h == expected);
  const TokenFileHeader back =
      parse_token_file_header(reinterpret_cast<const unsigned char*>(h.data()), 32 + 4 * 0x0102030405060708ull, "x");
  CHECK(back.version == 1);
  CHECK(back.token_bytes == 4);
  CHECK(back.token_count == 0x0102030405060708ull);
  CHECK(refusal(header(1, 2, 10), 32 + 20).empty());
  CHECK(refusal(header(1, 2, 0), 32).empty());  // an empty token file is well-formed
}

TEST_CASE("each malformed header is refused with the file's name and the fix") {
  const std::string fix = "re-create it with `loom-tokenize INPUT... -o data/x.tok`";
  struct Case {
    std::string bytes;
    uint64_t size;
    std::string expected;
  };
  const Case cases[] = {
      {"LOOMTOK", 7, "too short to be a Loom token file (7 bytes, the header alone is 32)"},
      {"GPT2BIN!" + header(1, 2, 4).substr(8), 40, "not a Loom token file"},
      {header(2, 2, 4), 40, "token file version 2 is not supported (this build reads version 1)"},
      {header(1, 3, 4), 44, "3 bytes per token is not supported (2 = uint16, 4 = uint32)"},
      {header(1, 2, 4), 41, "the 9 bytes after the header are not a whole number of 2-byte tokens"},
      {header(1, 4, 4), 34, "the 2 bytes after the header are not a whole number of 4-byte tokens"},
      {header(1, 2, 4), 38, "the header says 4 tokens but the file holds 3; the file is truncated or corrupt"},
      {header(1, 2, 4), 42, "the header says 4 tokens but the file holds 5"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expected);
    const std::string message = refusal(c.bytes, c.size);
    CHECK(message.rfind("data/x.tok: ", 0) == 0);
    CHECK(contains(message, c.expected));
    CHECK(contains(message, fix));
    CHECK(message.find('\n') == std::string::npos);
  }
}
