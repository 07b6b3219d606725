// byte_level.hpp: GPT-2's byte-to-character table. Byte-level vocabularies (GPT-2, Llama 3,
// Qwen, GPT-4o) spell every byte as one printable character: the 188 printable Latin-1 bytes as
// themselves, the other 68 as U+0100 onwards, in byte order (the table is a published fact of
// the GPT-2 encoder, reproduced by every implementation).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::tok {

// The character (as UTF-8) that stands for each byte.
const std::array<std::string, 256>& byte_to_chars();

// The byte a character stands for, or -1 if it stands for none.
int chars_to_byte(char32_t cp);

// `text`'s bytes, each spelled as its character.
std::string bytes_to_chars(std::string_view text);

}  // namespace loom::tok
