// parser.cpp: see parser.hpp. Recursive descent; nesting is capped so hostile templates fail
// with an error instead of exhausting the stack.
#include "parser.hpp"

#include <cstdlib>

#include "template_error.hpp"

namespace loom::chat {

namespace {

constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Block program() {
    Block out;
    while (pos_ < t_.size()) out.push_back(any());
    return out;
  }

 private:
  struct Depth {
    Parser& p;
    explicit Depth(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("the template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~Depth() { --p.depth_; }
  };

  int line() const { return pos_ < t_.size() ? t_[pos_].line : (t_.empty() ? 1 : t_.back().line); }
  [[noreturn]] void fail(const std::string& what) const { throw TemplateError(line(), what); }
  bool is(Tok type) const { return pos_ < t_.size() && t_[pos_].type == type; }
  bool is_word(const char* word, size_t ahead = 0) const {
    return pos_ + ahead < t_.size() && t_[pos_ + ahead].type == Tok::identifier && t_[pos_ + ahead].value == word;
  }
  const Token& expect(Tok type, const char* what) {
    if (!is(type)) fail(std::string("expected ") + what + (pos_ < t_.size() ? ", found '" + t_[pos_].value + "'" : ", found the end"));
    return t_[pos_++];
  }
  void expect_word(const char* word) {
    if (!is_word(word)) fail(std::string("expected '") + word + "'" + (pos_ < t_.size() ? ", found '" + t_[pos_].value + "'" : ""));
    ++pos_;
  }
  NodePtr node(Node::Kind kind) const {
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->line = line();
    return n;
  }
  bool at_tag(const char* word) const { return is(Tok::open_statement) && is_word(word, 1); }

  NodePtr any() {
    Depth guard(*this);
    if (is(Tok::text)) {
      auto n = node(Node::Kind::text);
      n->value = Value::string(t_[pos_++].value);
      return n;
    }
    if (is(Tok::open_expression)) {
      ++pos_;
      auto n = node(Node::Kind::output);
      n->a = expression();
      expect(Tok::close_expression, "'}}'");
      return n;
    }
    if (is(Tok::open_statement)) return statement();
    fail("unexpected '" + t_[pos_].value + "'");
  }

  Block block_until(std::initializer_list<const char*> ends) {
    Block out;
    while (true) {
      if (pos_ >= t_.size()) fail(std::string("a block is never closed with {% ") + *ends.begin() + " %}");
      for (const char* end : ends)
        if (at_tag(end)) return out;
      out.push_back(any());
    }
  }

  void end_tag(const char* word) {
    expect(Tok::open_statement, "'{%'");
    expect_word(word);
    expect(Tok::close_statement, "'%}'");
  }

  NodePtr statement() {
    ++pos_;  // {%
    if (!is(Tok::identifier)) fail("expected a tag name after {%");
    const std::string tag = t_[pos_].value;
    const int tag_line = line();
    ++pos_;
    NodePtr n;
    if (tag == "set") n = set_tag();
    else if (tag == "if") {
      n = if_tag();
      end_tag("endif");
    } else if (tag == "for") {
      n = for_tag();
      end_tag("endfor");
    } else if (tag == "break" || tag == "continue") {
      n = node(tag == "break" ? Node::Kind::break_ : Node::Kind::continue_);
      expect(Tok::close_statement, "'%}'");
    } else {
      throw TemplateError(tag_line, "unsupported tag '" + tag + "'");
    }
    n->line = tag_line;
    return n;
  }

  NodePtr set_tag() {
    auto n = node(Node::Kind::set);
    n->a = expression_sequence(true);
    if (is(Tok::equals)) {
      ++pos_;
      n->b = expression_sequence(false);
      expect(Tok::close_statement, "'%}'");
    } else {  // {% set x %}...{% endset %}
      expect(Tok::close_statement, "'%}'");
      n->body = block_until({"endset"});
      end_tag("endset");
    }
    return n;
  }

  NodePtr if_tag() {
    auto n = node(Node::Kind::if_);
    n->a = expression();
    expect(Tok::close_statement, "'%}'");
    n->body = block_until({"elif", "else", "endif"});
    if (at_tag("elif")) {
      pos_ += 2;
      n->alternate.push_back(if_tag());
    } else if (at_tag("else")) {
      pos_ += 2;
      expect(Tok::close_statement, "'%}'");
      n->alternate = block_until({"endif"});
    }
    return n;
  }

  NodePtr for_tag() {
    auto n = node(Node::Kind::for_);
    n->a = expression_sequence(true);
    expect_word("in");
    n->b = expression();  // `xs if cond` parses as a select expression: the loop filter
    if (n->b->kind == Node::Kind::select) {
      n->c = n->b->b;
      n->b = n->b->a;
    }
    expect(Tok::close_statement, "'%}'");
    n->body = block_until({"else", "endfor"});
    if (at_tag("else")) {
      pos_ += 2;
      expect(Tok::close_statement, "'%}'");
      n->alternate = block_until({"endfor"});
    }
    return n;
  }

  // `a, b` (a tuple) or one expression; primary: only names and member access (assignment targets).
  NodePtr expression_sequence(bool primary) {
    NodePtr first = primary ? call_member() : expression();
    if (!is(Tok::comma)) return first;
    auto tuple = node(Node::Kind::tuple);
    tuple->items.push_back(first);
    while (is(Tok::comma)) {
      ++pos_;
      tuple->items.push_back(primary ? call_member() : expression());
    }
    return tuple;
  }

  NodePtr expression() {
    Depth guard(*this);
    NodePtr value = logical_or();
    if (!is_word("if")) return value;
    ++pos_;
    NodePtr test = logical_or();
    if (is_word("else")) {
      ++pos_;
      auto n = node(Node::Kind::ternary);
      n->a = test;
      n->b = value;
      n->c = expression();
      return n;
    }
    auto n = node(Node::Kind::select);
    n->a = value;
    n->b = test;
    return n;
  }

  NodePtr binary(const std::string& op, NodePtr left, NodePtr right) {
    auto n = node(Node::Kind::binary);
    n->name = op;
    n->a = std::move(left);
    n->b = std::move(right);
    return n;
  }

  NodePtr logical_or() {
    NodePtr left = logical_and();
    while (is_word("or")) {
      ++pos_;
      left = binary("or", left, logical_and());
    }
    return left;
  }

  NodePtr logical_and() {
    NodePtr left = logical_not();
    while (is_word("and")) {
      ++pos_;
      left = binary("and", left, logical_not());
    }
    return left;
  }

  NodePtr logical_not() {
    Depth guard(*this);
    if (!is_word("not")) return comparison();
    ++pos_;
    auto n = node(Node::Kind::unary);
    n->name = "not";
    n->a = logical_not();
    return n;
  }

  NodePtr comparison() {
    NodePtr left = additive();
    while (true) {
      std::string op;
      if (is_word("not") && is_word("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else if (is_word("in") || is(Tok::compare)) {
        op = t_[pos_++].value;
      } else {
        return left;
      }
      left = binary(op, left, additive());
    }
  }

  NodePtr additive() {
    NodePtr left = multiplicative();
    while (is(Tok::additive)) {
      const std::string op = t_[pos_++].value;
      left = binary(op, left, multiplicative());
    }
    return left;
  }

  NodePtr multiplicative() {
    NodePtr left = power();
    while (is(Tok::multiplicative)) {
      const std::string op = t_[pos_++].value;
      left = binary(op, left, power());
    }
    return left;
  }

  NodePtr power() {
    NodePtr left = test();
    while (is(Tok::power)) {
      ++pos_;
      left = binary("**", left, test());
    }
    return left;
  }

  NodePtr test() {
    NodePtr operand = filter();
    while (is_word("is")) {
      ++pos_;
      auto n = node(Node::Kind::test);
      if (is_word("not")) {
        n->negate = true;
        ++pos_;
      }
      // `is none` / `is true` / `is false`: words the lexer reads as identifiers like any other
      n->name = expect(Tok::identifier, "a test name after 'is'").value;
      n->a = operand;
      operand = n;
    }
    return operand;
  }

  NodePtr filter() {
    NodePtr operand = unary_sign();
    while (is(Tok::pipe)) {
      ++pos_;
      auto n = node(Node::Kind::filter);
      n->name = expect(Tok::identifier, "a filter name after '|'").value;
      n->a = operand;
      if (is(Tok::open_paren)) arguments(*n);
      operand = n;
    }
    return operand;
  }

  NodePtr unary_sign() {
    Depth guard(*this);
    if ((is(Tok::unary) || is(Tok::additive)) && (t_[pos_].value == "-" || t_[pos_].value == "+")) {
      auto n = node(Node::Kind::unary);
      n->name = t_[pos_++].value;
      n->a = unary_sign();
      return n;
    }
    return call_member();
  }

  void arguments(Node& call) {
    expect(Tok::open_paren, "'('");
    while (!is(Tok::close_paren)) {
      if (pos_ >= t_.size()) fail("a call's arguments are never closed with ')'");
      if (is(Tok::identifier) && pos_ + 1 < t_.size() && t_[pos_ + 1].type == Tok::equals) {
        call.keys.push_back(t_[pos_].value);
        pos_ += 2;
        call.kwargs.push_back(expression());
      } else {
        if (!call.keys.empty()) fail("positional arguments must come before keyword arguments");
        call.items.push_back(expression());
      }
      if (is(Tok::comma)) ++pos_;
      else if (!is(Tok::close_paren)) fail("expected ',' or ')' in a call's arguments");
    }
    ++pos_;
  }

  NodePtr call_member() {
    Depth guard(*this);
    NodePtr object = member(primary());
    while (is(Tok::open_paren)) {
      auto n = node(Node::Kind::call);
      n->a = object;
      arguments(*n);
      object = member(n);
    }
    return object;
  }

  NodePtr member(NodePtr object) {
    while (is(Tok::dot) || is(Tok::open_bracket)) {
      if (is(Tok::dot)) {
        ++pos_;
        auto n = node(Node::Kind::member);
        n->a = object;
        if (is(Tok::identifier)) n->name = t_[pos_++].value;
        else if (is(Tok::number)) n->b = primary();
        else fail("expected a name after '.'");
        object = n;
        continue;
      }
      ++pos_;
      NodePtr parts[3];
      size_t count = 0;
      bool slice = false;
      while (!is(Tok::close_bracket)) {
        if (pos_ >= t_.size() || count >= 3) fail("a subscript is never closed with ']'");
        if (is(Tok::colon)) {
          ++pos_;
          ++count;
          slice = true;
        } else {
          parts[count] = expression();
          if (is(Tok::colon)) {
            ++pos_;
            ++count;
            slice = true;
          }
        }
      }
      ++pos_;
      if (!slice && !parts[0]) fail("an empty subscript []");
      auto n = node(slice ? Node::Kind::slice : Node::Kind::member);
      n->a = object;
      n->b = parts[0];
      if (slice) {
        n->c = parts[1];
        n->d = parts[2];
      }
      object = n;
    }
    return object;
  }

  NodePtr primary() {
    Depth guard(*this);
    if (pos_ >= t_.size()) fail("the template ends inside an expression");
    const Token& token = t_[pos_++];
    switch (token.type) {
      case Tok::number: {
        auto n = node(Node::Kind::literal);
        n->value = token.value.find('.') != std::string::npos ? Value::floating(std::strtod(token.value.c_str(), nullptr))
                                                               : Value::integer(std::strtoll(token.value.c_str(), nullptr, 10));
        return n;
      }
      case Tok::string: {
        std::string text = token.value;
        while (is(Tok::string)) text += t_[pos_++].value;  // adjacent literals join
        auto n = node(Node::Kind::literal);
        n->value = Value::string(text);
        return n;
      }
      case Tok::identifier: {
        auto n = node(Node::Kind::identifier);
        n->name = token.value;
        return n;
      }
      case Tok::open_paren: {
        NodePtr inner = expression_sequence(false);
        expect(Tok::close_paren, "')'");
        return inner;
      }
      case Tok::open_bracket: {
        auto n = node(Node::Kind::list);
        while (!is(Tok::close_bracket)) {
          if (pos_ >= t_.size()) fail("a list is never closed with ']'");
          n->items.push_back(expression());
          if (is(Tok::comma)) ++pos_;
        }
        ++pos_;
        return n;
      }
      case Tok::open_brace: {
        auto n = node(Node::Kind::dict);
        while (!is(Tok::close_brace)) {
          if (pos_ >= t_.size()) fail("a dict is never closed with '}'");
          n->items.push_back(expression());
          expect(Tok::colon, "':' in a dict");
          n->items.push_back(expression());
          if (is(Tok::comma)) ++pos_;
        }
        ++pos_;
        return n;
      }
      default:
        --pos_;
        fail("unexpected '" + token.value + "'");
    }
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Block parse(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace loom::chat
