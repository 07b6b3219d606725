// js_regex.cpp: see js_regex.hpp.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "js_regex.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <vector>

#include "tokenizer_error.hpp"
#include "unicode_tables.hpp"
#include "utf8.hpp"

namespace loom::tok {

namespace {

using unicode::CodeRange;
using Ranges = std::vector<CodeRange>;

// The union of `tables`, sorted and merged.
Ranges unite(std::initializer_list<std::span<const CodeRange>> tables) {
  Ranges all;
  for (const auto& table : tables) all.insert(all.end(), table.begin(), table.end());
  std::sort(all.begin(), all.end(), [](const CodeRange& a, const CodeRange& b) { return a.first < b.first; });
  Ranges out;
  for (const CodeRange& r : all) {
    if (!out.empty() && r.first <= out.back().last + 1) out.back().last = std::max(out.back().last, r.last);
    else out.push_back(r);
  }
  return out;
}

Ranges complement(const Ranges& ranges) {
  Ranges out;
  char32_t next = 0;
  for (const CodeRange& r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

// \p{name} for a general category or a group of them, as Oniguruma defines them; nullopt for
// other properties (scripts and the like), which PCRE2 keeps.
std::optional<Ranges> category(std::string_view name) {
  using namespace unicode;
  if (name == "L") return unite({kLu, kLl, kLt, kLm, kLo});
  if (name == "LC" || name == "L&") return unite({kLu, kLl, kLt});
  if (name == "M") return unite({kMn, kMc, kMe});
  if (name == "N") return unite({kNd, kNl, kNo});
  if (name == "P") return unite({kPc, kPd, kPs, kPe, kPi, kPf, kPo});
  if (name == "S") return unite({kSm, kSc, kSk, kSo});
  if (name == "Z") return unite({kZs, kZl, kZp});
  if (name == "C") return unite({kCc, kCf, kCo, kCn});
  static const std::pair<std::string_view, std::span<const CodeRange>> kTables[] = {
      {"Lu", kLu}, {"Ll", kLl}, {"Lt", kLt}, {"Lm", kLm}, {"Lo", kLo}, {"Mn", kMn}, {"Mc", kMc}, {"Me", kMe},
      {"Nd", kNd}, {"Nl", kNl}, {"No", kNo}, {"Pc", kPc}, {"Pd", kPd}, {"Ps", kPs}, {"Pe", kPe}, {"Pi", kPi},
      {"Pf", kPf}, {"Po", kPo}, {"Sm", kSm}, {"Sc", kSc}, {"Sk", kSk}, {"So", kSo}, {"Zs", kZs}, {"Zl", kZl},
      {"Zp", kZp}, {"Cc", kCc}, {"Cf", kCf}, {"Co", kCo}, {"Cn", kCn}};
  for (const auto& [abbreviation, table] : kTables)
    if (name == abbreviation) return unite({table});
  return std::nullopt;
}

std::string hex(char32_t c) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "\\x{%X}", static_cast<unsigned>(c));
  return buffer;
}

// `ranges` as the items of a PCRE2 character class.
std::string class_items(const Ranges& ranges) {
  std::string out;
  for (const CodeRange& r : ranges) out += r.first == r.last ? hex(r.first) : hex(r.first) + "-" + hex(r.last);
  return out;
}

// `ranges` where `in_class`, else a class of them of its own.
std::string as_class(const Ranges& ranges, bool in_class) {
  return in_class ? class_items(ranges) : "[" + class_items(ranges) + "]";
}

// Steps and backtracking depth per match: far above what a tokenizer regex needs on any text.
constexpr uint32_t kMatchLimit = 10'000'000;
constexpr uint32_t kDepthLimit = 100'000;

std::string quote_literal(const std::string& text) {
  return "\\Q" + text + "\\E";  // PCRE2 takes everything up to \E literally
}

}  // namespace

std::string javascript_to_pcre2(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      switch (e) {
        // Oniguruma's Unicode meanings, from the tables, whatever Unicode version PCRE2 has.
        case 's': out += as_class(unite({unicode::kWhiteSpace}), in_class); break;
        case 'S': out += as_class(complement(unite({unicode::kWhiteSpace})), in_class); break;
        case 'd': out += as_class(unite({unicode::kNd}), in_class); break;
        case 'D': out += as_class(complement(unite({unicode::kNd})), in_class); break;
        case 'w': out += as_class(unite({unicode::kWord}), in_class); break;
        case 'W': out += as_class(complement(unite({unicode::kWord})), in_class); break;
        case 'h': out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;  // Oniguruma's \h is a hex digit
        case 'H': out += in_class ? "\\x{0}-/:-@G-`g-\\x{10FFFF}" : "[^0-9a-fA-F]"; break;
        case 'p': case 'P': {  // \p{Name}, \p{^Name}, \P{Name}
          const size_t close = i + 1 < pattern.size() && pattern[i + 1] == '{' ? pattern.find('}', i + 2) : std::string::npos;
          if (close == std::string::npos) { out += c; out += e; break; }
          std::string_view name(pattern.data() + i + 2, close - i - 2);
          bool negated = e == 'P';
          if (!name.empty() && name[0] == '^') { negated = !negated; name.remove_prefix(1); }
          if (const auto ranges = category(name)) {
            out += as_class(negated ? complement(*ranges) : *ranges, in_class);
            i = close;
          } else {
            out += c; out += e;
          }
          break;
        }
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
  // Oniguruma's Ruby syntax, as tokenizers compiles: ^ and $ are line anchors and \n alone ends a line.
  pcre2_compile_context* compile_context = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(compile_context, PCRE2_NEWLINE_LF);
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK, &error, &offset,
                                  compile_context);
  pcre2_compile_context_free(compile_context);
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
