// lexer.hpp: template source to tokens. First the whitespace rules Hugging Face renders chat
// templates with (trim_blocks and lstrip_blocks, as the reference applies them: a newline right
// after "%}", "#}" or "-}" goes, spaces and tabs before a line's "{%" or "{#" go, one trailing
// newline of the template goes; the `generation` tag is dropped), then text, {{ }}, {% %} and
// {# #} with "-" whitespace control. Every token keeps its line in the original source.
#pragma once

#include <string>
#include <vector>

namespace loom::chat {

enum class Tok {
  text, open_statement, close_statement, open_expression, close_expression,
  string, number, identifier, open_paren, close_paren, open_bracket, close_bracket, open_brace, close_brace,
  comma, dot, colon, pipe, equals, compare, additive, multiplicative, power, unary
};

struct Token {
  Tok type;
  std::string value;
  int line;
};

// Throws TemplateError naming the line of the first character it cannot read.
std::vector<Token> tokenize(const std::string& source);

}  // namespace loom::chat
