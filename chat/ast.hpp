// ast.hpp: the parsed template. One node type with a kind and the few slots each kind uses
// (listed per kind below), so the parser and the interpreter stay small.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "value.hpp"

namespace loom::chat {

struct Node;
using NodePtr = std::shared_ptr<Node>;
using Block = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    // statements
    text,       // value: the text
    output,     // a: the expression printed
    set,        // a: target (identifier, member, tuple); b: value, or body for a block set
    if_,        // a: test; body; alternate
    for_,       // a: loop variable(s); b: iterable; c: optional filter; body; alternate (else)
    break_, continue_,
    // expressions
    literal,    // value
    identifier, // name
    list, tuple, dict,  // items (dict: key, value, key, value, ...)
    member,     // a: object; b: key expression, or name for obj.name
    slice,      // a: object; b, c, d: start, stop, step (any may be null)
    call,       // a: callee; items: positional; keys + kwargs: keyword arguments
    filter,     // a: operand; name; items, keys + kwargs: its arguments
    test,       // a: operand; name; negate
    unary,      // name: the operator; a
    binary,     // name: the operator; a, b
    ternary,    // a: condition; b: if true; c: if false
    select      // a: value; b: condition (undefined when false)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negate = false;
  NodePtr a, b, c, d;
  Block body, alternate, items, kwargs;
  std::vector<std::string> keys;
};

}  // namespace loom::chat
