// js_regex.hpp: the regular expressions of tokenizer.json, run by PCRE2 (JIT-compiled) with the
// meaning JavaScript gives them under the `u` flag, because the reference implementation that
// Loom must agree with token for token is JavaScript (transformers.js):
//   - \s and \S are JavaScript's white space set (it has U+FEFF and lacks U+0085, unlike PCRE2's);
//   - \d and \w are ASCII-only, as in JavaScript;
//   - the case-insensitive contraction group of the GPT-2 family is spelled out letter by letter,
//     as transformers.js rewrites it (PCRE2's Unicode case folding would also match U+017F);
//   - after an empty match the search resumes one code point further on (String.matchAll).
// Patterns come from downloaded files: matching has a step and depth limit, so a hostile pattern
// fails with a TokenizerError instead of running for hours.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace loom::tok {

class JsRegex {
 public:
  // `pattern` in JavaScript syntax; `literal` matches the text of `pattern` exactly.
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

// The PCRE2 pattern that behaves as JavaScript's `pattern` does (see above); exposed for tests.
std::string javascript_to_pcre2(const std::string& pattern);

}  // namespace loom::tok
