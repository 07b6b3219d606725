// corpus.hpp: the text the tokenizer test compares on, generated (deterministically, from a
// seed) rather than shipped: English prose with contractions, Chinese, Japanese, Korean and other
// scripts, code with tabs and long runs of spaces, emoji with ZWJ sequences, skin tones and
// flags, numbers in many notations, Unicode white space, decomposed accents, special-token
// strings inside text, and invalid UTF-8 of every kind (lone continuation bytes, overlongs,
// surrogates, truncated sequences, bytes that never occur).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::test {

// Documents of 100 bytes to ~6 KB, at least `min_bytes` in all.
std::vector<std::string> tokenizer_corpus(size_t min_bytes, uint64_t seed);

// Writes documents as <uint32 little-endian length><bytes> (what reference.py reads).
void write_corpus(const std::vector<std::string>& documents, const std::string& path);

}  // namespace loom::test
