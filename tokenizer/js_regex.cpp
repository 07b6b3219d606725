// js_regex.cpp: see js_regex.hpp.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "js_regex.hpp"

#include <pcre2.h>

#include "tokenizer_error.hpp"
#include "utf8.hpp"

namespace loom::tok {

namespace {

// JavaScript's \s (ECMA-262 WhiteSpace and LineTerminator) as class items.
constexpr const char* kJsSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}\\x{FEFF}";

// transformers.js replaces this group before compiling, since JavaScript lacks (?i:...).
constexpr std::string_view kContractions = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr std::string_view kContractionsSpelled =
    "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))";

// Steps and backtracking depth per match: far above what a tokenizer regex needs on any text.
constexpr uint32_t kMatchLimit = 10'000'000;
constexpr uint32_t kDepthLimit = 100'000;

std::string quote_literal(const std::string& text) {
  return "\\Q" + text + "\\E";  // PCRE2 takes everything up to \E literally
}

}  // namespace

std::string javascript_to_pcre2(const std::string& source) {
  std::string pattern = source;
  for (size_t at = pattern.find(kContractions); at != std::string::npos;
       at = pattern.find(kContractions, at + kContractionsSpelled.size())) {
    pattern.replace(at, kContractions.size(), kContractionsSpelled);
  }
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      switch (e) {
        case 's': out += in_class ? std::string(kJsSpace) : "[" + std::string(kJsSpace) + "]"; break;
        case 'S':
          if (in_class) throw TokenizerError("\\S inside a character class is not supported");
          out += "[^" + std::string(kJsSpace) + "]";
          break;
        case 'd': out += in_class ? "0-9" : "[0-9]"; break;
        case 'D': out += in_class ? "\\x{0}-/:-\\x{10FFFF}" : "[^0-9]"; break;
        case 'w': out += in_class ? "A-Za-z0-9_" : "[A-Za-z0-9_]"; break;
        case 'W': out += in_class ? "\\x{0}-/:-@\\[-^`{-\\x{10FFFF}" : "[^A-Za-z0-9_]"; break;
        case '#': case '&': case '~': out += e; break;  // Python escapes that JavaScript drops
        case 'u': {  // \uXXXX and \u{X...}: PCRE2 spells both \x{...}
          size_t digits_at = i + 1, digits = 4;
          if (digits_at < pattern.size() && pattern[digits_at] == '{') {
            const size_t close = pattern.find('}', digits_at);
            if (close == std::string::npos) throw TokenizerError("unterminated \\u{...} escape");
            ++digits_at;
            digits = close - digits_at;
            i = close;
          } else {
            i += 4;
          }
          out += "\\x{" + pattern.substr(digits_at, digits) + "}";
          break;
        }
        default: out += c; out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct JsRegex::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  ~Compiled() {
    if (context) pcre2_match_context_free(context);
    if (code) pcre2_code_free(code);
  }
};

JsRegex::JsRegex(const std::string& pattern, bool literal, const std::string& where)
    : compiled_(std::make_unique<Compiled>()), where_(where) {
  std::string translated;
  try {
    translated = literal ? quote_literal(pattern) : javascript_to_pcre2(pattern);
  } catch (const TokenizerError& e) {
    throw TokenizerError(where + ": " + e.what());
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!compiled_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw TokenizerError(where + ": the regular expression does not compile (" +
                         reinterpret_cast<const char*>(message) + " at offset " + std::to_string(offset) + ")");
  }
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  compiled_->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(compiled_->context, kMatchLimit);
  pcre2_set_depth_limit(compiled_->context, kDepthLimit);
}

JsRegex::~JsRegex() = default;

void JsRegex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  // One match data per thread: tokenizing runs on many threads with one tokenizer.
  thread_local struct Data {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    ~Data() { pcre2_match_data_free(data); }
  } data;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data.data,
                               compiled_->context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw TokenizerError(where_ + ": matching failed (" + reinterpret_cast<const char*>(message) + ")");
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.data);
    const size_t begin = ovector[0], end = ovector[1];
    on_match(begin, end);
    if (end > begin) {
      start = end;
    } else {
      if (end >= text.size()) return;
      start = end + utf8_length(static_cast<unsigned char>(text[end]));  // JavaScript's AdvanceStringIndex
    }
  }
}

}  // namespace loom::tok
