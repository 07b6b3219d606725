// lexer.cpp: see lexer.hpp.
#include "lexer.hpp"

#include <cctype>
#include <utility>

#include "template_error.hpp"

namespace loom::chat {

namespace {

// Text with the line of each character, so whitespace rules can drop characters.
struct Source {
  std::string text;
  std::vector<int> lines;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

Source with_lines(const std::string& s) {
  Source out{s, std::vector<int>(s.size())};
  int line = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    out.lines[i] = line;
    if (s[i] == '\n') ++line;
  }
  return out;
}

template <class Keep>
Source filter(const Source& in, Keep&& keep) {
  Source out;
  for (size_t i = 0; i < in.text.size(); ++i)
    if (keep(i)) {
      out.text += in.text[i];
      out.lines.push_back(in.lines[i]);
    }
  return out;
}

bool at(const std::string& s, size_t i, const char* what) { return s.compare(i, std::char_traits<char>::length(what), what) == 0; }

Source preprocess(const std::string& template_source) {
  Source src = with_lines(template_source);
  if (!src.text.empty() && src.text.back() == '\n') {
    src.text.pop_back();
    src.lines.pop_back();
  }
  // lstrip_blocks: spaces and tabs from a line's start up to "{#", "{%" or "{-".
  std::vector<bool> drop(src.text.size(), false);
  for (size_t start = 0; start < src.text.size();) {
    size_t i = start;
    while (i < src.text.size() && (src.text[i] == ' ' || src.text[i] == '\t')) ++i;
    if (i + 1 < src.text.size() && src.text[i] == '{' && (src.text[i + 1] == '#' || src.text[i + 1] == '%' || src.text[i + 1] == '-'))
      for (size_t k = start; k < i; ++k) drop[k] = true;
    const size_t newline = src.text.find('\n', start);
    if (newline == std::string::npos) break;
    start = newline + 1;
  }
  src = filter(src, [&](size_t i) { return !drop[i]; });
  // trim_blocks: the newline right after "#}", "%}" or "-}".
  src = filter(src, [&](size_t i) {
    return !(src.text[i] == '\n' && i >= 2 && src.text[i - 1] == '}' &&
             (src.text[i - 2] == '#' || src.text[i - 2] == '%' || src.text[i - 2] == '-'));
  });
  // The transformers-only {% generation %} / {% endgeneration %} tags, with their "-" rules.
  drop.assign(src.text.size(), false);
  for (size_t i = src.text.find("{%"); i != std::string::npos; i = src.text.find("{%", i + 2)) {
    size_t k = i + 2;
    const bool strip_before = k < src.text.size() && src.text[k] == '-';
    if (strip_before) ++k;
    while (k < src.text.size() && is_space(src.text[k])) ++k;
    if (at(src.text, k, "endgeneration")) k += 13;
    else if (at(src.text, k, "generation")) k += 10;
    else continue;
    while (k < src.text.size() && is_space(src.text[k])) ++k;
    const bool strip_after = k < src.text.size() && src.text[k] == '-';
    if (strip_after) ++k;
    if (!at(src.text, k, "%}")) continue;
    size_t begin = i, end = k + 2;
    if (strip_before)
      while (begin > 0 && is_space(src.text[begin - 1])) --begin;
    if (strip_after)
      while (end < src.text.size() && is_space(src.text[end])) ++end;
    for (size_t q = begin; q < end; ++q) drop[q] = true;
  }
  return filter(src, [&](size_t i) { return !drop[i]; });
}

// Multi-character operators before their prefixes, as the reference orders them.
const std::pair<const char*, Tok> kSymbols[] = {
    {"{%", Tok::open_statement}, {"%}", Tok::close_statement}, {"{{", Tok::open_expression}, {"}}", Tok::close_expression},
    {"(", Tok::open_paren},      {")", Tok::close_paren},      {"{", Tok::open_brace},        {"}", Tok::close_brace},
    {"[", Tok::open_bracket},    {"]", Tok::close_bracket},    {",", Tok::comma},             {".", Tok::dot},
    {":", Tok::colon},           {"|", Tok::pipe},             {"<=", Tok::compare},          {">=", Tok::compare},
    {"==", Tok::compare},        {"!=", Tok::compare},         {"<", Tok::compare},           {">", Tok::compare},
    {"+", Tok::additive},        {"-", Tok::additive},         {"~", Tok::additive},          {"**", Tok::power},
    {"*", Tok::multiplicative},  {"//", Tok::multiplicative},  {"/", Tok::multiplicative},    {"%", Tok::multiplicative},
    {"=", Tok::equals}};

class Lexer {
 public:
  explicit Lexer(Source src) : s_(std::move(src.text)), lines_(std::move(src.lines)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const Tok last = tokens_.empty() ? Tok::text : tokens_.back().type;
      if (tokens_.empty() || last == Tok::close_statement || last == Tok::close_expression || comment_before_) {
        comment_before_ = false;
        const size_t start = pos_;
        while (pos_ < s_.size() && !(s_[pos_] == '{' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == '%' || s_[pos_ + 1] == '{' || s_[pos_ + 1] == '#'))) ++pos_;
        if (pos_ > start) {
          push(Tok::text, s_.substr(start, pos_ - start), start);
          continue;
        }
      }
      if (at(s_, pos_, "{#")) {
        comment();
        continue;
      }
      if (at(s_, pos_, "{%-") || at(s_, pos_, "{{-")) {
        strip_trailing_text();
        push(s_[pos_ + 1] == '%' ? Tok::open_statement : Tok::open_expression, s_.substr(pos_, 2), pos_);
        pos_ += 3;
        continue;
      }
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
      if (pos_ >= s_.size()) break;
      if (at(s_, pos_, "-%}") || at(s_, pos_, "-}}")) {
        push(s_[pos_ + 1] == '%' ? Tok::close_statement : Tok::close_expression, s_.substr(pos_ + 1, 2), pos_);
        pos_ += 3;
        while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
        continue;
      }
      token();
    }
    return std::move(tokens_);
  }

 private:
  int line(size_t at_pos) const { return lines_.empty() ? 1 : lines_[std::min(at_pos, lines_.size() - 1)]; }
  [[noreturn]] void fail(const std::string& what) const { throw TemplateError(line(pos_), what); }
  void push(Tok type, std::string value, size_t at_pos) { tokens_.push_back({type, std::move(value), line(at_pos)}); }

  void strip_trailing_text() {
    if (tokens_.empty() || tokens_.back().type != Tok::text) return;
    std::string& text = tokens_.back().value;
    while (!text.empty() && is_space(text.back())) text.pop_back();
    if (text.empty()) tokens_.pop_back();
  }

  void comment() {
    pos_ += 2;
    const bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
    if (strip_before) ++pos_;
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) fail("the comment {# is never closed with #}");
    const bool strip_after = end > pos_ && s_[end - 1] == '-';
    if (strip_before) strip_trailing_text();
    pos_ = end + 2;
    if (strip_after)
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
    comment_before_ = true;
  }

  std::string string_literal(char quote) {
    static const std::pair<char, char> escapes[] = {{'n', '\n'}, {'t', '\t'}, {'r', '\r'}, {'b', '\b'},
                                                    {'f', '\f'}, {'v', '\v'}, {'\'', '\''}, {'"', '"'}, {'\\', '\\'}};
    std::string out;
    ++pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] != '\\') {
        out += s_[pos_++];
        continue;
      }
      if (++pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      bool known = false;
      for (const auto& [from, to] : escapes)
        if (from == e) {
          out += to;
          known = true;
        }
      if (!known) fail(std::string("unsupported escape \\") + e + " in a string");
    }
    if (pos_ >= s_.size()) fail("a string is never closed");
    ++pos_;
    return out;
  }

  std::string digits() {
    const size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    std::string num = s_.substr(start, pos_ - start);
    if (!num.empty() && pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1])) &&
        (tokens_.empty() || tokens_.back().type != Tok::dot)) {
      ++pos_;
      const size_t frac = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      num += "." + s_.substr(frac, pos_ - frac);
    }
    return num;
  }

  void token() {
    const char c = s_[pos_];
    const size_t start = pos_;
    if ((c == '-' || c == '+') && !tokens_.empty()) {
      const Tok last = tokens_.back().type;
      const bool binary = last == Tok::identifier || last == Tok::number || last == Tok::string ||
                          last == Tok::close_paren || last == Tok::close_bracket;
      if (last == Tok::text) fail(std::string("unexpected '") + c + "'");
      if (!binary) {  // a sign: part of a number literal, or a unary operator
        ++pos_;
        const std::string num = digits();
        push(num.empty() ? Tok::unary : Tok::number, std::string(1, c) + num, start);
        return;
      }
    }
    for (const auto& [symbol, type] : kSymbols) {
      if (type == Tok::close_expression && brace_depth_ > 0) continue;  // "}}" inside a dict literal
      if (!at(s_, pos_, symbol)) continue;
      push(type, symbol, start);
      if (type == Tok::open_expression) brace_depth_ = 0;
      if (type == Tok::open_brace) ++brace_depth_;
      if (type == Tok::close_brace) --brace_depth_;
      pos_ += std::char_traits<char>::length(symbol);
      return;
    }
    if (c == '\'' || c == '"') return push(Tok::string, string_literal(c), start);
    if (std::isdigit(static_cast<unsigned char>(c))) return push(Tok::number, digits(), start);
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      return push(Tok::identifier, s_.substr(start, pos_ - start), start);
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  std::string s_;
  std::vector<int> lines_;
  size_t pos_ = 0;
  int brace_depth_ = 0;
  bool comment_before_ = false;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(preprocess(source)).run(); }

}  // namespace loom::chat
