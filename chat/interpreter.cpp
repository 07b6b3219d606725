// interpreter.cpp: see interpreter.hpp. Operators follow @huggingface/jinja's runtime.
#include "interpreter.hpp"

#include <cmath>

#include "builtins.hpp"
#include "template_error.hpp"

namespace loom::chat {

namespace {

using T = Value::Type;
using K = Node::Kind;

constexpr int kMaxDepth = 400;
constexpr uint64_t kMaxSteps = 10'000'000;
constexpr size_t kMaxOutput = 64u << 20;

struct BreakSignal {};
struct ContinueSignal {};

struct Scope {
  Object vars;
  Scope* parent = nullptr;
  Value lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent)
      for (const auto& [k, v] : s->vars)
        if (k == name) return v;
    return {};
  }
  void set(const std::string& name, Value value) {
    for (auto& [k, v] : vars)
      if (k == name) {
        v = std::move(value);
        return;
      }
    vars.emplace_back(name, std::move(value));
  }
};

// Python's slice of n items: the indices it selects.
std::vector<int64_t> slice_indices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const int64_t step = step_v.is(T::integer) ? step_v.i : 1;
  if (step == 0) throw TemplateError(0, "slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t fallback, bool is_stop) {
    if (!v.is(T::integer)) return fallback;
    int64_t x = v.i < 0 ? v.i + n : v.i;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1) + (is_stop && x < -1 ? 0 : 0);
  };
  const int64_t start = clamp(start_v, step > 0 ? 0 : n - 1, false), stop = clamp(stop_v, step > 0 ? n : -1, true);
  std::vector<int64_t> out;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(k);
  return out;
}

class Interpreter {
 public:
  std::string run(const Block& program, const nlohmann::json& context) {
    Scope globals_scope;
    globals_scope.vars = globals();
    if (context.is_object())
      for (const auto& [key, value] : context.items()) globals_scope.set(key, from_json(value));
    std::string out;
    exec(program, globals_scope, out);
    return out;
  }

 private:
  struct Depth {
    Interpreter& in;
    int line;
    Depth(Interpreter& i, int l) : in(i), line(l) {
      if (++in.depth_ > kMaxDepth) throw TemplateError(line, "the template recurses deeper than " + std::to_string(kMaxDepth));
      if (++in.steps_ > kMaxSteps) throw TemplateError(line, "the template takes more than " + std::to_string(kMaxSteps) + " steps");
    }
    ~Depth() { --in.depth_; }
  };

  void exec(const Block& block, Scope& scope, std::string& out) {
    for (const NodePtr& node : block) {
      exec_one(*node, scope, out);
      if (out.size() > kMaxOutput) throw TemplateError(node->line, "the template writes more than 64 MiB");
    }
  }

  void exec_one(const Node& n, Scope& scope, std::string& out) {
    Depth guard(*this, n.line);
    switch (n.kind) {
      case K::text: out += n.value.s; return;
      case K::output: {
        const Value v = eval(*n.a, scope);
        if (!v.is(T::none) && !v.is(T::undefined)) out += v.str();
        return;
      }
      case K::set: return assign(n, scope);
      case K::if_: return exec(eval(*n.a, scope).truthy() ? n.body : n.alternate, scope, out);
      case K::for_: return loop(n, scope, out);
      case K::break_: throw BreakSignal{};
      case K::continue_: throw ContinueSignal{};
      default: {
        const Value v = eval(n, scope);
        if (!v.is(T::none) && !v.is(T::undefined)) out += v.str();
      }
    }
  }

  void bind(const Node& target, const Value& v, Scope& scope, int line) {
    if (target.kind == K::identifier) return scope.set(target.name, v);
    if (target.kind != K::tuple) throw TemplateError(line, "cannot assign to this expression");
    if (!v.is(T::array) || v.array->size() != target.items.size())
      throw TemplateError(line, "cannot unpack " + v.str() + " into " + std::to_string(target.items.size()) + " names");
    for (size_t k = 0; k < target.items.size(); ++k) bind(*target.items[k], (*v.array)[k], scope, line);
  }

  void assign(const Node& n, Scope& scope) {
    Value v;
    if (n.b) {
      v = eval(*n.b, scope);
    } else {
      std::string body;
      exec(n.body, scope, body);
      v = Value::string(body);
    }
    if (n.a->kind == K::member) {
      const Value object = eval(*n.a->a, scope);
      if (!object.is(T::ns) || n.a->name.empty()) throw TemplateError(n.line, "only a namespace's attributes can be set");
      Value target = object;
      target.set(n.a->name, v);
      return;
    }
    bind(*n.a, v, scope, n.line);
  }

  void loop(const Node& n, Scope& scope, std::string& out) {
    Scope loop_scope{{}, &scope};
    Value iterable = eval(*n.b, loop_scope);
    if (iterable.is(T::object)) iterable = apply_filter("list", Value::list([&] {
                                             Array keys;
                                             for (const auto& [k, v] : *iterable.object) keys.push_back(Value::string(k));
                                             return keys;
                                           }()), {}, {});
    if (iterable.is(T::undefined)) iterable = Value::list();  // Jinja's Undefined iterates as empty
    if (!iterable.is(T::array)) throw TemplateError(n.line, "a for loop needs a list or a mapping, got " + iterable.str());
    Array items;
    for (const Value& item : *iterable.array) {
      if (n.c) {
        Scope test_scope{{}, &loop_scope};
        bind(*n.a, item, test_scope, n.line);
        if (!eval(*n.c, test_scope).truthy()) continue;
      }
      items.push_back(item);
    }
    const auto count = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < count; ++k) {
      if (++steps_ > kMaxSteps) throw TemplateError(n.line, "the template takes more than " + std::to_string(kMaxSteps) + " steps");
      loop_scope.set("loop", Value::mapping({{"index", Value::integer(k + 1)},
                                             {"index0", Value::integer(k)},
                                             {"revindex", Value::integer(count - k)},
                                             {"revindex0", Value::integer(count - k - 1)},
                                             {"first", Value::boolean(k == 0)},
                                             {"last", Value::boolean(k == count - 1)},
                                             {"length", Value::integer(count)},
                                             {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value()},
                                             {"nextitem", k + 1 < count ? items[static_cast<size_t>(k + 1)] : Value()}}));
      bind(*n.a, items[static_cast<size_t>(k)], loop_scope, n.line);
      std::string body;
      try {
        exec(n.body, loop_scope, body);
      } catch (const ContinueSignal&) {
      } catch (const BreakSignal&) {
        out += body;
        break;
      }
      out += body;
    }
    if (items.empty()) exec(n.alternate, loop_scope, out);
  }

  Value eval(const Node& n, Scope& scope) {
    Depth guard(*this, n.line);
    try {
      Value v = eval_node(n, scope);
      if (v.is(T::string) && v.s.size() > kMaxOutput) throw TemplateError(n.line, "a string grows past 64 MiB");
      return v;
    } catch (const TemplateError& e) {
      if (e.line > 0) throw;
      throw TemplateError(n.line, e.what());  // a builtin's error, placed at this node
    }
  }

  std::pair<std::vector<Value>, Value> arguments(const Node& n, Scope& scope) {
    std::vector<Value> args;
    for (const auto& a : n.items) args.push_back(eval(*a, scope));
    Value kwargs;
    if (!n.keys.empty()) {
      kwargs = Value::mapping({}, T::kwargs);
      for (size_t k = 0; k < n.keys.size(); ++k) kwargs.set(n.keys[k], eval(*n.kwargs[k], scope));
    }
    return {std::move(args), kwargs};
  }

  Value eval_node(const Node& n, Scope& scope) {
    switch (n.kind) {
      case K::literal: return n.value;
      case K::identifier: return scope.lookup(n.name);
      case K::list: case K::tuple: {
        Array items;
        for (const auto& item : n.items) items.push_back(eval(*item, scope));
        return Value::list(std::move(items));
      }
      case K::dict: {
        Value d = Value::mapping();
        for (size_t k = 0; k + 1 < n.items.size(); k += 2) {
          const Value key = eval(*n.items[k], scope);
          if (!key.is(T::string)) throw TemplateError(n.line, "dict keys must be strings");
          d.set(key.s, eval(*n.items[k + 1], scope));
        }
        return d;
      }
      case K::member: return member(n, scope);
      case K::slice: return slice(n, scope);
      case K::call: {
        auto [args, kwargs] = arguments(n, scope);
        if (!kwargs.is(T::undefined)) args.push_back(kwargs);
        const Value callee = eval(*n.a, scope);
        if (!callee.is(T::function)) throw TemplateError(n.line, "cannot call something that is not a function");
        return (*callee.fn)(args);
      }
      case K::filter: {
        const Value operand = eval(*n.a, scope);
        auto [args, kwargs] = arguments(n, scope);
        return apply_filter(n.name, operand, args, kwargs);
      }
      case K::test: {
        if (!has_test(n.name)) throw TemplateError(n.line, "unsupported test '" + n.name + "'");
        const bool result = apply_test(n.name, eval(*n.a, scope), {});
        return Value::boolean(n.negate ? !result : result);
      }
      case K::unary: {
        const Value v = eval(*n.a, scope);
        if (n.name == "not") return Value::boolean(!v.truthy());
        if (!v.is_number() && !v.is(T::boolean)) throw TemplateError(n.line, "unary " + n.name + " needs a number");
        const double sign = n.name == "-" ? -1 : 1;
        return v.is(T::floating) ? Value::floating(sign * v.d) : Value::integer(static_cast<int64_t>(sign) * static_cast<int64_t>(v.number()));
      }
      case K::binary: return binary(n, scope);
      case K::ternary: return eval(*n.a, scope).truthy() ? eval(*n.b, scope) : eval(*n.c, scope);
      case K::select: return eval(*n.b, scope).truthy() ? eval(*n.a, scope) : Value();
      default: throw TemplateError(n.line, "a statement where an expression belongs");
    }
  }

  Value member(const Node& n, Scope& scope) {
    const Value object = eval(*n.a, scope);
    if (!n.b) return member_of(object, n.name);
    const Value key = eval(*n.b, scope);
    if (key.is(T::string)) return member_of(object, key.s);
    if (!key.is(T::integer)) throw TemplateError(n.line, "a subscript must be a string or an integer");
    if (object.is(T::array)) {
      const auto size = static_cast<int64_t>(object.array->size());
      const int64_t at = key.i < 0 ? key.i + size : key.i;
      return at >= 0 && at < size ? (*object.array)[static_cast<size_t>(at)] : Value();
    }
    if (object.is(T::string)) {
      const auto cps = slice_points(object.s);
      const auto size = static_cast<int64_t>(cps.size());
      const int64_t at = key.i < 0 ? key.i + size : key.i;
      return at >= 0 && at < size ? Value::string(cps[static_cast<size_t>(at)]) : Value();
    }
    if (object.is_mapping()) throw TemplateError(n.line, "a mapping's key must be a string");
    return {};
  }

  static std::vector<std::string> slice_points(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
      size_t len = 1;
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0xF0) len = 4;
      else if (c >= 0xE0) len = 3;
      else if (c >= 0xC0) len = 2;
      out.push_back(s.substr(i, len));
      i += len;
    }
    return out;
  }

  Value slice(const Node& n, Scope& scope) {
    const Value object = eval(*n.a, scope);
    const Value start = n.b ? eval(*n.b, scope) : Value(), stop = n.c ? eval(*n.c, scope) : Value(),
                step = n.d ? eval(*n.d, scope) : Value();
    if (object.is(T::array)) {
      Array out;
      for (int64_t k : slice_indices(static_cast<int64_t>(object.array->size()), start, stop, step))
        out.push_back((*object.array)[static_cast<size_t>(k)]);
      return Value::list(std::move(out));
    }
    if (object.is(T::string)) {
      const auto cps = slice_points(object.s);
      std::string out;
      for (int64_t k : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step)) out += cps[static_cast<size_t>(k)];
      return Value::string(out);
    }
    throw TemplateError(n.line, "only lists and strings can be sliced");
  }

  Value binary(const Node& n, Scope& scope) {
    const std::string& op = n.name;
    const Value left = eval(*n.a, scope);
    if (op == "and") return left.truthy() ? eval(*n.b, scope) : left;
    if (op == "or") return left.truthy() ? left : eval(*n.b, scope);
    const Value right = eval(*n.b, scope);
    if (op == "==") return Value::boolean(loose_equal(left, right));
    if (op == "!=") return Value::boolean(!loose_equal(left, right));
    if (left.is(T::undefined) || right.is(T::undefined)) {
      if (right.is(T::undefined) && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
      // Python raises UndefinedError naming what was missing ("'dict object' has no attribute 'content'").
      const std::string& missing = left.is(T::undefined) ? left.s : right.s;
      if (!missing.empty()) throw TemplateError(n.line, missing);
      throw TemplateError(n.line, "Cannot perform operation " + op + " on undefined values");
    }
    if (left.is(T::none) || right.is(T::none)) throw TemplateError(n.line, "cannot apply '" + op + "' to none");
    if (op == "~") return Value::string(left.str() + right.str());
    if (left.is_number() && right.is_number()) return arithmetic(n, left, right);
    if (left.is(T::array) && right.is(T::array) && op == "+") {
      Array joined = *left.array;
      joined.insert(joined.end(), right.array->begin(), right.array->end());
      return Value::list(std::move(joined));
    }
    if (right.is(T::array) && (op == "in" || op == "not in")) {
      bool found = false;
      for (const auto& item : *right.array) found = found || (item.type == left.type && loose_equal(item, left));
      return Value::boolean(found == (op == "in"));
    }
    if ((left.is(T::string) || right.is(T::string)) && op == "+") return Value::string(left.str() + right.str());
    if (left.is(T::string) && right.is(T::string)) {
      if (op == "in") return Value::boolean(right.s.find(left.s) != std::string::npos);
      if (op == "not in") return Value::boolean(right.s.find(left.s) == std::string::npos);
      if (op == "<") return Value::boolean(left.s < right.s);
      if (op == ">") return Value::boolean(left.s > right.s);
      if (op == "<=") return Value::boolean(left.s <= right.s);
      if (op == ">=") return Value::boolean(left.s >= right.s);
    }
    if (left.is(T::string) && right.is_mapping() && (op == "in" || op == "not in")) {
      bool found = false;
      for (const auto& [k, v] : *right.object) found = found || k == left.s;
      return Value::boolean(found == (op == "in"));
    }
    throw TemplateError(n.line, "unsupported operands for '" + op + "'");
  }

  Value arithmetic(const Node& n, const Value& l, const Value& r) {
    const std::string& op = n.name;
    const bool fl = l.is(T::floating) || r.is(T::floating);
    const double a = l.number(), b = r.number();
    auto num = [&](double x) { return fl ? Value::floating(x) : Value::integer(static_cast<int64_t>(x)); };
    if (op == "+") return fl ? Value::floating(a + b) : Value::integer(l.i + r.i);
    if (op == "-") return fl ? Value::floating(a - b) : Value::integer(l.i - r.i);
    if (op == "*") return fl ? Value::floating(a * b) : Value::integer(l.i * r.i);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") {
      if (b == 0) throw TemplateError(n.line, "integer division by zero");
      return num(std::floor(a / b));
    }
    if (op == "%") {
      if (!fl && r.i == 0) throw TemplateError(n.line, "modulo by zero");
      return fl ? Value::floating(std::fmod(a, b)) : Value::integer(l.i % r.i);
    }
    if (op == "**") return fl || b < 0 ? Value::floating(std::pow(a, b)) : Value::integer(static_cast<int64_t>(std::pow(a, b)));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
    throw TemplateError(n.line, "unsupported operator '" + op + "' for numbers");
  }

  int depth_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace

std::string render_program(const Block& program, const nlohmann::json& context) {
  try {
    return Interpreter().run(program, context);
  } catch (const BreakSignal&) {
    throw TemplateError(0, "break outside a for loop");
  } catch (const ContinueSignal&) {
    throw TemplateError(0, "continue outside a for loop");
  }
}

}  // namespace loom::chat
