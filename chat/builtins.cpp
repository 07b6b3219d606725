// builtins.cpp: see builtins.hpp. Filters, tests and methods were written after @huggingface/jinja
// and are moving to Python's Jinja as transformers renders with it (tests/chat compares with it):
// strip/lstrip/rstrip/trim take only the given characters, else Python's white space;
// selectattr/rejectattr test a missing attribute as undefined; undefined is iterable (empty).
#include "builtins.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <utf8proc.h>

#include "template_error.hpp"

namespace loom::chat {

namespace {

using T = Value::Type;

[[noreturn]] void fail(const std::string& what) { throw TemplateError(0, what); }

// Python's str.isspace, what str.strip() and Jinja's trim filter take away.
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Code points of valid UTF-8 with their byte offsets.
std::vector<std::pair<char32_t, size_t>> code_points(const std::string& s) {
  std::vector<std::pair<char32_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i), static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    out.emplace_back(static_cast<char32_t>(cp < 0 ? 0xFFFD : cp), i);
    i += n > 0 ? static_cast<size_t>(n) : 1;
  }
  return out;
}

// Python's str.strip/lstrip/rstrip: the code points of `chars` when it is a string, else white space.
std::string trim(const std::string& s, bool left, bool right, const Value& chars = Value()) {
  const auto cps = code_points(s);
  std::vector<char32_t> set;
  if (chars.is(T::string))
    for (const auto& [cp, at] : code_points(chars.s)) set.push_back(cp);
  const auto strip = [&](char32_t c) {
    return chars.is(T::string) ? std::find(set.begin(), set.end(), c) != set.end() : py_space(c);
  };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && strip(cps[begin].first)) ++begin;
  while (right && end > begin && strip(cps[end - 1].first)) --end;
  const size_t from = begin < cps.size() ? cps[begin].second : s.size();
  const size_t to = end < cps.size() ? cps[end].second : s.size();
  return s.substr(from, to - from);
}

std::string map_case(const std::string& s, bool upper) {
  std::string out;
  for (const auto& [cp, at] : code_points(s)) {
    utf8proc_uint8_t buf[4];
    const auto mapped = upper ? utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)) : utf8proc_tolower(static_cast<utf8proc_int32_t>(cp));
    out.append(reinterpret_cast<char*>(buf), static_cast<size_t>(utf8proc_encode_char(mapped, buf)));
  }
  return out;
}

std::string title_case(const std::string& s) {  // upper case after a non-letter, as the reference's titleCase
  std::string out;
  bool start = true;
  for (const auto& [cp, at] : code_points(s)) {
    const bool letter = utf8proc_category(static_cast<utf8proc_int32_t>(cp)) <= UTF8PROC_CATEGORY_LO;
    std::string one;
    utf8proc_uint8_t buf[4];
    one.assign(reinterpret_cast<char*>(buf), static_cast<size_t>(utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf)));
    out += letter ? map_case(one, start) : one;
    start = !letter && cp != '\'';
  }
  return out;
}

Value kwarg(const Value& kwargs, const std::string& name) { return kwargs.is(T::undefined) ? Value() : kwargs.get(name); }

Value split(const std::string& s, const std::vector<Value>& args) {
  Array parts;
  const int64_t max = args.size() > 1 && args[1].is(T::integer) ? args[1].i : -1;
  if (args.empty() || args[0].is(T::none)) {  // on runs of white space
    const auto cps = code_points(s);
    size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && py_space(cps[k].first)) ++k;
      if (k == cps.size()) break;
      if (max >= 0 && static_cast<int64_t>(parts.size()) >= max) {
        parts.push_back(Value::string(s.substr(cps[k].second)));
        break;
      }
      const size_t from = cps[k].second;
      while (k < cps.size() && !py_space(cps[k].first)) ++k;
      parts.push_back(Value::string(s.substr(from, (k < cps.size() ? cps[k].second : s.size()) - from)));
    }
    return Value::list(std::move(parts));
  }
  if (!args[0].is(T::string)) fail("split() takes a string separator");
  const std::string& sep = args[0].s;
  if (sep.empty()) fail("split() with an empty separator");
  size_t from = 0;
  for (size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, from)) {
    if (max >= 0 && static_cast<int64_t>(parts.size()) >= max) break;
    parts.push_back(Value::string(s.substr(from, at - from)));
    from = at + sep.size();
  }
  parts.push_back(Value::string(s.substr(from)));
  return Value::list(std::move(parts));
}

Value replace(const std::string& s, const std::vector<Value>& args) {
  if (args.size() < 2 || !args[0].is(T::string) || !args[1].is(T::string)) fail("replace() takes two strings");
  int64_t count = args.size() > 2 && args[2].is(T::integer) ? args[2].i : -1;
  if (args.size() > 2 && args[2].is(T::kwargs) && args[2].get("count").is(T::integer)) count = args[2].get("count").i;
  std::string out = s;
  size_t at = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    at = out.find(args[0].s, at);
    if (at == std::string::npos) break;
    out.replace(at, args[0].s.size(), args[1].s);
    at += args[1].s.size() + (args[0].s.empty() ? 1 : 0);
  }
  return Value::string(out);
}

bool prefix_test(const std::string& s, const std::vector<Value>& args, bool suffix) {
  if (args.empty()) fail(std::string(suffix ? "endswith" : "startswith") + "() takes an argument");
  auto one = [&](const std::string& p) {
    return suffix ? s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0 : s.compare(0, p.size(), p) == 0;
  };
  if (args[0].is(T::string)) return one(args[0].s);
  if (args[0].is(T::array)) {
    for (const auto& item : *args[0].array)
      if (item.is(T::string) && one(item.s)) return true;
    return false;
  }
  fail("startswith()/endswith() take a string or a tuple of strings");
}

Value method(const Value& self, std::function<Value(const Value&, std::vector<Value>&)> body) {
  return Value::function([self, body](std::vector<Value>& args) { return body(self, args); });
}

Value items_of(const Value& m) {
  Array out;
  for (const auto& [k, v] : *m.object) out.push_back(Value::list({Value::string(k), v}));
  return Value::list(std::move(out));
}

std::string strftime_now(const std::string& format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[256];
  return std::strftime(text, sizeof text, format.c_str(), &local) ? text : "";
}

Value attr_filter(const Value& operand, const std::vector<Value>& args, bool select) {
  if (args.empty() || !args[0].is(T::string)) fail("selectattr/rejectattr take an attribute name");
  Array out;
  for (const auto& item : *operand.array) {
    if (!item.is_mapping()) fail("selectattr/rejectattr apply to a list of mappings");
    // A missing attribute is undefined, and the test still runs on it (Jinja's select_or_reject):
    // selectattr("tool_calls", "undefined") keeps the messages without tool calls.
    const Value a = item.get(args[0].s);
    const bool result =
        args.size() > 1 ? apply_test(args[1].s, a, std::vector<Value>(args.begin() + 2, args.end())) : a.truthy();
    if (result == select) out.push_back(item);
  }
  return Value::list(std::move(out));
}

// The reference's name for a value's type, for messages that quote it.
std::string type_name(const Value& v) {
  switch (v.type) {
    case T::undefined: return "UndefinedValue";
    case T::none: return "NullValue";
    case T::boolean: return "BooleanValue";
    case T::integer: return "IntegerValue";
    case T::floating: return "FloatValue";
    case T::string: return "StringValue";
    case T::array: return "ArrayValue";
    case T::object: return "ObjectValue";
    case T::ns: return "NamespaceValue";
    case T::kwargs: return "KeywordArgumentsValue";
    case T::function: return "FunctionValue";
  }
  return "RuntimeValue";
}

}  // namespace

bool has_test(const std::string& n) {
  static const char* const names[] = {"boolean", "callable", "odd", "even", "false", "true", "none", "string", "number", "integer",
                                      "iterable", "mapping", "sequence", "lower", "upper", "defined", "undefined", "equalto", "eq"};
  return std::find_if(std::begin(names), std::end(names), [&](const char* x) { return n == x; }) != std::end(names);
}

bool apply_test(const std::string& n, const Value& v, const std::vector<Value>& args) {
  if (n == "boolean") return v.is(T::boolean);
  if (n == "callable") return v.is(T::function);
  if (n == "odd" || n == "even") {
    if (!v.is(T::integer)) fail("cannot test " + n + " on a value that is not an integer");
    return (v.i % 2 != 0) == (n == "odd");
  }
  if (n == "false") return v.is(T::boolean) && !v.b;
  if (n == "true") return v.is(T::boolean) && v.b;
  if (n == "none") return v.is(T::none);
  if (n == "string") return v.is(T::string);
  if (n == "number") return v.is_number();
  if (n == "integer") return v.is(T::integer);
  // Python's iter() and len() accept mappings, and Jinja's Undefined too (it iterates as empty).
  if (n == "iterable") return v.is(T::array) || v.is(T::string) || v.is_mapping() || v.is(T::undefined);
  if (n == "mapping") return v.is(T::object) || v.is(T::kwargs);
  if (n == "sequence") return v.is(T::array) || v.is_mapping() || v.is(T::string) || v.is(T::undefined);
  if (n == "lower") return v.is(T::string) && map_case(v.s, false) == v.s;
  if (n == "upper") return v.is(T::string) && map_case(v.s, true) == v.s;
  if (n == "defined") return !v.is(T::undefined);
  if (n == "undefined") return v.is(T::undefined);
  if (n == "equalto" || n == "eq") {  // strict equality of the underlying values
    const Value other = args.empty() ? Value() : args[0];
    if (v.type != other.type) return v.is_number() && other.is_number() && v.number() == other.number();
    return loose_equal(v, other);
  }
  fail("unsupported test '" + n + "'");
}

Value member_of(const Value& o, const std::string& name) {
  if (o.is(T::object) || o.is(T::kwargs)) {
    for (const auto& [k, v] : *o.object)
      if (k == name) return v;
    if (name == "items") return method(o, [](const Value& m, std::vector<Value>&) { return items_of(m); });
    if (name == "keys" || name == "values")
      return method(o, [name](const Value& m, std::vector<Value>&) {
        Array out;
        for (const auto& [k, v] : *m.object) out.push_back(name == "keys" ? Value::string(k) : v);
        return Value::list(std::move(out));
      });
    if (name == "get")
      return method(o, [](const Value& m, std::vector<Value>& args) {
        if (args.empty() || !args[0].is(T::string)) fail("get() takes a string key");
        for (const auto& [k, v] : *m.object)
          if (k == args[0].s) return v;
        return args.size() > 1 ? args[1] : Value::none();
      });
    Value missing;  // undefined, with the words Jinja's UndefinedError says when it is used
    missing.s = "'dict object' has no attribute '" + name + "'";
    return missing;
  }
  if (o.is(T::ns)) return o.get(name);
  if (o.is(T::array)) return name == "length" ? Value::integer(static_cast<int64_t>(o.array->size())) : Value();
  if (!o.is(T::string)) return {};
  if (name == "length") return Value::integer(js_length(o.s));
  using Body = std::function<Value(const Value&, std::vector<Value>&)>;
  static const std::pair<const char*, Body> methods[] = {
      {"upper", [](const Value& s, std::vector<Value>&) { return Value::string(map_case(s.s, true)); }},
      {"lower", [](const Value& s, std::vector<Value>&) { return Value::string(map_case(s.s, false)); }},
      {"strip", [](const Value& s, std::vector<Value>& a) { return Value::string(trim(s.s, true, true, a.empty() ? Value() : a[0])); }},
      {"lstrip", [](const Value& s, std::vector<Value>& a) { return Value::string(trim(s.s, true, false, a.empty() ? Value() : a[0])); }},
      {"rstrip", [](const Value& s, std::vector<Value>& a) { return Value::string(trim(s.s, false, true, a.empty() ? Value() : a[0])); }},
      {"title", [](const Value& s, std::vector<Value>&) { return Value::string(title_case(s.s)); }},
      {"capitalize",
       [](const Value& s, std::vector<Value>&) {
         const auto cps = code_points(s.s);
         if (cps.empty()) return s;
         const size_t second = cps.size() > 1 ? cps[1].second : s.s.size();
         return Value::string(map_case(s.s.substr(0, second), true) + s.s.substr(second));
       }},
      {"startswith", [](const Value& s, std::vector<Value>& a) { return Value::boolean(prefix_test(s.s, a, false)); }},
      {"endswith", [](const Value& s, std::vector<Value>& a) { return Value::boolean(prefix_test(s.s, a, true)); }},
      {"split", [](const Value& s, std::vector<Value>& a) { return split(s.s, a); }},
      {"replace", [](const Value& s, std::vector<Value>& a) { return replace(s.s, a); }},
  };
  for (const auto& [n, body] : methods)
    if (name == n) return method(o, body);
  return {};
}

Value apply_filter(const std::string& n, const Value& v, const std::vector<Value>& args, const Value& kwargs) {
  if (n == "safe") return v;
  if (n == "trim" && v.is(T::undefined)) return Value::string("");  // Jinja trims soft_str(undefined), ""
  if (n == "tojson") {
    const Value indent = kwarg(kwargs, "indent");
    return Value::string(to_json(v, indent.is(T::integer) ? static_cast<int>(std::clamp<int64_t>(indent.i, 0, 64)) : 0));
  }
  if (n == "default" || n == "d") {
    const Value fallback = args.empty() ? Value::string("") : args[0];
    const bool boolean = args.size() > 1 ? args[1].truthy() : kwarg(kwargs, "boolean").truthy();
    return v.is(T::undefined) || (boolean && !v.truthy()) ? fallback : v;
  }
  if (n == "length" || n == "count") {
    if (v.is(T::string)) return Value::integer(js_length(v.s));
    if (v.is(T::array)) return Value::integer(static_cast<int64_t>(v.array->size()));
    if (v.is_mapping()) return Value::integer(static_cast<int64_t>(v.object->size()));
  }
  if (v.is(T::array)) {
    if (n == "list") return v;
    if (n == "first") return v.array->empty() ? Value() : v.array->front();
    if (n == "last") return v.array->empty() ? Value() : v.array->back();
    if (n == "reverse") return Value::list(Array(v.array->rbegin(), v.array->rend()));
    if (n == "string") return Value::string(to_json(v, 0, false));
    if (n == "join") {
      const Value sep = !args.empty() ? args[0] : kwarg(kwargs, "separator");
      std::string out;
      for (size_t k = 0; k < v.array->size(); ++k) out += (k ? (sep.is(T::string) ? sep.s : "") : "") + (*v.array)[k].str();
      return Value::string(out);
    }
    if (n == "selectattr" || n == "rejectattr") return attr_filter(v, args, n == "selectattr");
    if (n == "map") {
      const Value attribute = kwarg(kwargs, "attribute");
      if (!attribute.is(T::string)) fail("map() is supported with attribute= only");
      Array out;
      for (const auto& item : *v.array) {
        const Value got = item.get(attribute.s);
        out.push_back(got.is(T::undefined) ? kwarg(kwargs, "default") : got);
      }
      return Value::list(std::move(out));
    }
  } else if (v.is(T::string)) {
    if (n == "trim") return Value::string(trim(v.s, true, true, args.empty() ? kwarg(kwargs, "chars") : args[0]));
    if (n == "upper" || n == "lower") return Value::string(map_case(v.s, n == "upper"));
    if (n == "title") return Value::string(title_case(v.s));
    if (n == "capitalize") {
      std::vector<Value> none;
      return (*member_of(v, "capitalize").fn)(none);
    }
    if (n == "string" || n == "join") return v;
    if (n == "int") return Value::integer(std::strtoll(v.s.c_str(), nullptr, 10));
    if (n == "float") return Value::floating(std::strtod(v.s.c_str(), nullptr));
    if (n == "indent") {
      const int64_t width = !args.empty() && args[0].is(T::integer) ? args[0].i : kwarg(kwargs, "width").is(T::integer) ? kwarg(kwargs, "width").i : 4;
      const bool first = args.size() > 1 ? args[1].truthy() : kwarg(kwargs, "first").truthy();
      const bool blank = args.size() > 2 ? args[2].truthy() : kwarg(kwargs, "blank").truthy();
      std::string out;
      size_t start = 0, line = 0;
      while (true) {
        const size_t end = v.s.find('\n', start);
        const std::string part = v.s.substr(start, end == std::string::npos ? std::string::npos : end - start);
        out += ((!first && line == 0) || (!blank && part.empty()) ? "" : std::string(static_cast<size_t>(std::max<int64_t>(0, width)), ' ')) + part;
        if (end == std::string::npos) break;
        out += '\n';
        start = end + 1;
        ++line;
      }
      return Value::string(out);
    }
  } else if (v.is_number()) {
    if (n == "abs") return v.is(T::integer) ? Value::integer(std::llabs(v.i)) : Value::floating(std::fabs(v.d));
    if (n == "int") return Value::integer(static_cast<int64_t>(std::floor(v.number())));
    if (n == "float") return Value::floating(v.number());
    if (n == "string") return Value::string(v.str());
  } else if (v.is(T::object)) {
    if (n == "items") return items_of(v);
  } else if (v.is(T::boolean)) {
    if (n == "int") return Value::integer(v.b ? 1 : 0);
    if (n == "string") return Value::string(v.b ? "true" : "false");
    if (n == "bool") return v;
  }
  static const char* const known[] = {"list", "first", "last", "reverse", "string", "join", "selectattr", "rejectattr", "map",
                                      "trim", "upper", "lower", "title", "capitalize", "int", "float", "indent", "abs", "items", "bool"};
  if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return n == k; }) != std::end(known))
    fail("Cannot apply filter \"" + n + "\" to type: " + type_name(v));  // the reference's words
  fail("unsupported filter '" + n + "'");
}

Object globals() {
  Object g;
  g.emplace_back("true", Value::boolean(true));
  g.emplace_back("false", Value::boolean(false));
  g.emplace_back("none", Value::none());
  g.emplace_back("True", Value::boolean(true));
  g.emplace_back("False", Value::boolean(false));
  g.emplace_back("None", Value::none());
  g.emplace_back("raise_exception", Value::function([](std::vector<Value>& args) -> Value {
                   fail(args.empty() ? std::string("raise_exception() was called") : args[0].str());
                 }));
  g.emplace_back("namespace", Value::function([](std::vector<Value>& args) {
                   Value ns = Value::mapping({}, T::ns);
                   for (const auto& a : args)
                     if (a.is(T::kwargs) || a.is(T::object))
                       for (const auto& [k, v] : *a.object) ns.set(k, v);
                   return ns;
                 }));
  g.emplace_back("range", Value::function([](std::vector<Value>& args) {
                   int64_t start = 0, stop = 0, step = 1;
                   if (args.size() == 1 && args[0].is(T::integer)) stop = args[0].i;
                   else if (args.size() >= 2 && args[0].is(T::integer) && args[1].is(T::integer)) {
                     start = args[0].i;
                     stop = args[1].i;
                     if (args.size() > 2 && args[2].is(T::integer)) step = args[2].i;
                   } else fail("range() takes integers");
                   if (step == 0) fail("range() step must not be zero");
                   Array out;
                   for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
                     if (out.size() >= 1'000'000) fail("range() of more than a million items");
                     out.push_back(Value::integer(k));
                   }
                   return Value::list(std::move(out));
                 }));
  g.emplace_back("strftime_now", Value::function([](std::vector<Value>& args) {
                   if (args.empty() || !args[0].is(T::string)) fail("strftime_now() takes a format string");
                   return Value::string(strftime_now(args[0].s));
                 }));
  return g;
}

}  // namespace loom::chat
