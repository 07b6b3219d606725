// js_regex.hpp: the regular expressions of tokenizer.json, run by PCRE2 (JIT-compiled) with the
// meaning Hugging Face's tokenizers gives them (Rust, with Oniguruma), which Loom must agree with
// token for token (tests/tokenizers compares with it):
//   - \s, \d, \w and the general categories \p{L}, \p{Lu}, ... (also \P{..}, \p{^..}) are the
//     sets Oniguruma has, Unicode 16, from unicode_tables.hpp (made from tokenizers itself by
//     gen_unicode_tables.py), not PCRE2's, whose Unicode version is older: \s has U+0085 and
//     not U+FEFF, \d is every Nd digit, \w is Oniguruma's Word set; \h is a hex digit;
//   - other properties (scripts) are PCRE2's own;
//   - (?i) folds case as Unicode does (U+017F matches s), in both;
//   - ^ and $ are line anchors, and only \n ends a line (Oniguruma's Ruby syntax);
//   - after an empty match the search resumes one code point further on.
// The class keeps its old name; the patterns are in Oniguruma's syntax, of which the tokenizer
// files use a small common part. Patterns come from downloaded files: matching has a step and
// depth limit, so a hostile pattern fails with a TokenizerError instead of running for hours.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace loom::tok {

class JsRegex {
 public:
  // `pattern` in Oniguruma syntax; `literal` matches the text of `pattern` exactly.
  // Throws TokenizerError with `where` (the JSON path) when PCRE2 refuses the pattern.
  JsRegex(const std::string& pattern, bool literal, const std::string& where);
  ~JsRegex();
  JsRegex(const JsRegex&) = delete;
  JsRegex& operator=(const JsRegex&) = delete;

  // Calls `on_match(begin, end)` for each match in `text`, in order (byte offsets).
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string where_;
};

// The PCRE2 pattern that behaves as Oniguruma's `pattern` does (see above); exposed for tests.
std::string javascript_to_pcre2(const std::string& pattern);

}  // namespace loom::tok
