// unit_test.cpp: the tokenizer's pieces on inputs whose answer is known by hand.
#include <doctest/doctest.h>

#include "tokenizer/byte_level.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/js_regex.hpp"
#include "tokenizer/utf8.hpp"

using namespace loom::tok;

namespace {

std::vector<std::string> matches(const std::string& pattern, const std::string& text) {
  JsRegex re(pattern, false, "test");
  std::vector<std::string> out;
  re.for_each_match(text, [&](size_t b, size_t e) { out.push_back(text.substr(b, e - b)); });
  return out;
}

// A tiny byte-fallback BPE: a, b, ab, abc, c and the byte tokens for é.
Json tiny_tokenizer() {
  return Json::parse(R"({
    "added_tokens": [{"id": 9, "content": "<s>", "special": true}, {"id": 10, "content": "<sep>", "special": true, "lstrip": true, "rstrip": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
              "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "c": 4, "abc": 5, "▁": 6, "<0xC3>": 7, "<0xA9>": 8, "▁abc": 11},
              "merges": [["a", "b"], ["ab", "c"], ["▁", "abc"]]}
  })");
}

}  // namespace

TEST_CASE("invalid UTF-8 becomes U+FFFD per maximal subpart, as WHATWG decoders do") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(sanitize_utf8("a\x80z") == "a" + r + "z");
  CHECK(sanitize_utf8("\xC0\xAF") == r + r);              // C0 is never a lead byte
  CHECK(sanitize_utf8("\xE0\x80\xAF") == r + r + r);      // overlong: E0 needs A0..BF next
  CHECK(sanitize_utf8("\xED\xA0\x80") == r + r + r);      // surrogate
  CHECK(sanitize_utf8("\xE4\xB8") == r);                  // truncated at the end: one replacement
  CHECK(sanitize_utf8("\xE4\xB8z") == r + "z");
  CHECK(sanitize_utf8("\xF4\x90\x80\x80") == r + r + r + r);
  CHECK(sanitize_utf8("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");
  CHECK(is_valid_utf8("héllo") == true);
  CHECK(is_valid_utf8("\xFF") == false);
}

TEST_CASE("trimming takes Unicode White_Space, as Rust's str::trim in tokenizers") {
  CHECK(trim_white_space_start("\xC2\x85 a ") == "a ");                          // U+0085 goes
  CHECK(trim_white_space_end("a\xEF\xBB\xBF") == "a\xEF\xBB\xBF");                   // U+FEFF stays
}

TEST_CASE("regular expressions mean what they mean in Hugging Face's tokenizers (Oniguruma)") {
  // \s is Unicode White_Space: U+0085 is white space, U+FEFF is not.
  CHECK(matches("\\s+", "a\xC2\x85" "b") == std::vector<std::string>{"\xC2\x85"});
  CHECK(matches("\\s+", "a\xEF\xBB\xBF" "b").empty());
  CHECK(matches("[^\\S]+", "a\xC2\x85 b") == std::vector<std::string>{"\xC2\x85 "});
  CHECK(matches("\\d+", "12٣4x") == std::vector<std::string>{"12٣4"});  // \d is every Nd digit
  CHECK(matches("\\w+", "é_٣ ") == std::vector<std::string>{"é_٣"});
  // Case folding is Unicode's: U+017F folds to s.
  CHECK(matches("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "it'S ſ 'ſ").size() == 2);
  CHECK(matches("\\p{L}+", "héllo wörld") == std::vector<std::string>{"héllo", "wörld"});
  // The Unicode version is Oniguruma's (16), not PCRE2's: U+1C89 became a letter in 16.0.
  CHECK(matches("\\p{Lu}", "\xE1\xB2\x89") == std::vector<std::string>{"\xE1\xB2\x89"});
  CHECK(matches("\\P{L}+|\\p{^N}+", "a1") == std::vector<std::string>{"a", "1"});
  CHECK(matches("\\u0041", "ABA") == std::vector<std::string>{"A", "A"});
  CHECK(matches("^a|a$", "a\na\r\nb") == std::vector<std::string>{"a", "a"});  // line anchors, \n only
  // After an empty match the search moves one code point on.
  CHECK(matches("x*", "éx").size() == 3);
  CHECK_THROWS_WITH_AS(JsRegex("(unclosed", false, "pre_tokenizer.pattern"), doctest::Contains("pre_tokenizer.pattern"), TokenizerError);
}

TEST_CASE("every byte has its GPT-2 character and back") {
  for (int b = 0; b < 256; ++b) {
    size_t pos = 0;
    CHECK(chars_to_byte(next_code_point(byte_to_chars()[static_cast<size_t>(b)], pos)) == b);
  }
  CHECK(bytes_to_chars(" ") == "\xC4\xA0");  // Ġ
  CHECK(bytes_to_chars("\n") == "\xC4\x8A");  // Ċ
}

TEST_CASE("a byte-fallback BPE merges by rank, falls back to bytes, fuses unknowns and strips added tokens' spaces") {
  HfTokenizer tok(tiny_tokenizer(), Json(), "tiny");
  CHECK(tok.encode("abc") == std::vector<int32_t>{9, 11});          // ▁abc after three merges
  CHECK(tok.encode("ab c", false) == std::vector<int32_t>{6, 3, 6, 4});
  CHECK(tok.encode("é", false) == std::vector<int32_t>{6, 7, 8});   // bytes C3 A9
  CHECK(tok.encode("zz", false) == std::vector<int32_t>{6, 0});      // two unknowns fused into one
  CHECK(tok.encode("a <sep> b", false) == std::vector<int32_t>{6, 1, 10, 6, 2});
  CHECK(tok.decode({9, 11, 6, 7, 8}) == "<s> abc é");
  CHECK(tok.decode({9, 11}, true) == "abc");
  CHECK(tok.is_special(9));
  CHECK(tok.vocab_size() == 12);
}
