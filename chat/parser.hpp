// parser.hpp: tokens to the template's statements, with the reference's operator precedence
// (lowest first): ternary `a if c else b`, or, and, not, comparisons (== != < > <= >= in, not in),
// + - ~, * / // %, **, `is` tests, `|` filters, unary sign, calls and member access. Supported
// tags: set (also namespace members and block set), if/elif/else, for/else (with loop filters
// and unpacking), break, continue. macro, call and filter blocks are refused by name.
#pragma once

#include "ast.hpp"
#include "lexer.hpp"

namespace loom::chat {

// Throws TemplateError naming the line and what it could not parse.
Block parse(const std::vector<Token>& tokens);

}  // namespace loom::chat
