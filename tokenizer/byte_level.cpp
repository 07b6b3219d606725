// byte_level.cpp: see byte_level.hpp.
#include "byte_level.hpp"

#include "utf8.hpp"

namespace loom::tok {

namespace {

bool printable_latin1(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

std::array<char32_t, 256> make_table() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) table[b] = printable_latin1(b) ? static_cast<char32_t>(b) : next++;
  return table;
}

const std::array<char32_t, 256>& code_points() {
  static const std::array<char32_t, 256> table = make_table();
  return table;
}

}  // namespace

const std::array<std::string, 256>& byte_to_chars() {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> out;
    for (int b = 0; b < 256; ++b) append_utf8(out[b], code_points()[b]);
    return out;
  }();
  return chars;
}

int chars_to_byte(char32_t cp) {
  if (cp < 0x100) return printable_latin1(static_cast<int>(cp)) ? static_cast<int>(cp) : -1;
  for (int b = 0; b < 256; ++b)
    if (code_points()[b] == cp) return b;
  return -1;
}

std::string bytes_to_chars(std::string_view text) {
  const auto& chars = byte_to_chars();
  std::string out;
  out.reserve(text.size() * 2);
  for (unsigned char b : text) out += chars[b];
  return out;
}

}  // namespace loom::tok
