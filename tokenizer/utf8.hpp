// utf8.hpp: the UTF-8 the tokenizers need. Text from other people may hold invalid bytes; it is
// made valid once, at the door, the way the WHATWG Encoding Standard's decoder does (each
// maximal invalid subpart becomes one U+FFFD), which is what the JavaScript reference and every
// browser do. After that, everything inside works on valid UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace loom::tok {

// `text` with every invalid sequence replaced by U+FFFD (WHATWG "maximal subpart" rule).
std::string sanitize_utf8(std::string_view text);

// True when `text` is valid UTF-8 (no surrogates, no overlongs, nothing past U+10FFFF).
bool is_valid_utf8(std::string_view text);

// Byte length of the code point whose lead byte is `lead`, in valid UTF-8.
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Decodes the code point at `pos` of valid UTF-8 and moves `pos` past it.
char32_t next_code_point(std::string_view text, size_t& pos);

void append_utf8(std::string& out, char32_t cp);

// Unicode White_Space, what Rust's char::is_whitespace and so str::trim use in tokenizers (the
// Strip normalizer, added tokens' lstrip/rstrip): U+0085 is white space, U+FEFF is not.
bool is_white_space(char32_t cp);
std::string_view trim_white_space_start(std::string_view text);
std::string_view trim_white_space_end(std::string_view text);

}  // namespace loom::tok
