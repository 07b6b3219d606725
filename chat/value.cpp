// value.cpp: see value.hpp.
#include "value.hpp"

#include <cmath>
#include <cstdio>

namespace loom::chat {

bool Value::truthy() const {
  switch (type) {
    case Type::undefined: case Type::none: return false;
    case Type::boolean: return b;
    case Type::integer: return i != 0;
    case Type::floating: return d != 0 && !std::isnan(d);
    case Type::string: return !s.empty();
    case Type::array: return !array->empty();
    case Type::object: case Type::kwargs: return !object->empty();
    case Type::ns: case Type::function: return true;
  }
  return false;
}

namespace {

// JavaScript's Number.prototype.toString for the doubles templates meet.
std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {  // the shortest text that reads back the same
    std::snprintf(text, sizeof text, "%.*g", precision, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  std::string out = text;
  const size_t e = out.find('e');
  if (e != std::string::npos) {  // 1e+21 in JavaScript spelling; plain digits below 1e21
    const int exponent = std::atoi(out.c_str() + e + 1);
    if (exponent < 21 && exponent >= -6) {
      std::snprintf(text, sizeof text, "%.*f", exponent < 0 ? 17 : 0, v);
      out = text;
      if (out.find('.') != std::string::npos) {
        out.erase(out.find_last_not_of('0') + 1);
        if (out.back() == '.') out.pop_back();
      }
    } else {
      out = out.substr(0, e) + "e" + (exponent > 0 ? "+" : "-") + std::to_string(std::abs(exponent));
    }
  }
  return out;
}

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string Value::str() const {
  switch (type) {
    case Type::undefined: return "undefined";
    case Type::none: return "null";
    case Type::boolean: return b ? "true" : "false";
    case Type::integer: return std::to_string(i);
    case Type::floating:
      if (d == 0 && std::signbit(d)) return "-0.0";
      if (std::floor(d) == d && std::isfinite(d)) return js_number(d) + (js_number(d).find('e') == std::string::npos ? ".0" : "");
      return js_number(d);
    case Type::string: return s;
    case Type::function: return "[object Function]";
    default: return to_json(*this, 0, false);
  }
}

Value Value::get(const std::string& key) const {
  if (!object) return {};
  for (const auto& [k, v] : *object)
    if (k == key) return v;
  return {};
}

void Value::set(const std::string& key, Value value) {
  for (auto& [k, v] : *object)
    if (k == key) {
      v = std::move(value);
      return;
    }
  object->emplace_back(key, std::move(value));
}

Value from_json(const nlohmann::json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(json.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return Value::integer(json.get<int64_t>());
    case nlohmann::json::value_t::number_float: {
      const double v = json.get<double>();  // JavaScript has one number type: 2.0 in JSON is the integer 2
      return std::floor(v) == v && std::fabs(v) < 9e15 ? Value::integer(static_cast<int64_t>(v)) : Value::floating(v);
    }
    case nlohmann::json::value_t::string: return Value::string(json.get<std::string>());
    case nlohmann::json::value_t::array: {
      Array items;
      for (const auto& item : json) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Object items;
      for (const auto& [key, item] : json.items()) items.emplace_back(key, from_json(item));
      return Value::mapping(std::move(items));
    }
    default: return {};
  }
}

std::string to_json(const Value& v, int indent, bool undefined_as_null, int depth) {
  using T = Value::Type;
  switch (v.type) {
    case T::none: return "null";
    case T::undefined: return undefined_as_null ? "null" : "undefined";
    case T::boolean: return v.b ? "true" : "false";
    case T::integer: return std::to_string(v.i);
    case T::floating: return js_number(v.d);
    case T::string: return json_string(v.s);
    case T::function: return "null";
    default: break;
  }
  const std::string item_sep = indent ? "," : ", ";
  const std::string pad = indent ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const std::string child_pad = indent ? pad + std::string(static_cast<size_t>(indent), ' ') : "";
  std::vector<std::string> parts;
  if (v.type == T::array) {
    for (const auto& item : *v.array) parts.push_back(to_json(item, indent, undefined_as_null, depth + 1));
  } else {
    for (const auto& [key, item] : *v.object) parts.push_back(json_string(key) + ": " + to_json(item, indent, undefined_as_null, depth + 1));
  }
  const char open = v.type == T::array ? '[' : '{', close = v.type == T::array ? ']' : '}';
  std::string out(1, open);
  if (!parts.empty()) {
    for (size_t k = 0; k < parts.size(); ++k) out += (k ? item_sep : "") + child_pad + parts[k];
    out += pad;
  }
  return out + close;
}

int64_t js_length(const std::string& utf8) {
  int64_t n = 0;
  for (unsigned char c : utf8) {
    if ((c & 0xC0) != 0x80) ++n;  // one per code point ...
    if (c >= 0xF0) ++n;           // ... and a second unit for those past U+FFFF (surrogate pairs)
  }
  return n;
}

bool loose_equal(const Value& a, const Value& b) {
  using T = Value::Type;
  const bool a_null = a.type == T::none || a.type == T::undefined, b_null = b.type == T::none || b.type == T::undefined;
  if (a_null || b_null) return a_null && b_null;
  const bool a_num = a.is_number() || a.type == T::boolean, b_num = b.is_number() || b.type == T::boolean;
  if (a_num && b_num) return a.number() == b.number();
  if (a.type == T::string && b.type == T::string) return a.s == b.s;
  if (a.type == T::string && b_num) return !a.s.empty() && std::strtod(a.s.c_str(), nullptr) == b.number();
  if (a_num && b.type == T::string) return loose_equal(b, a);
  if (a.type != b.type) return false;
  if (a.array) return a.array == b.array;
  if (a.object) return a.object == b.object;
  if (a.fn) return a.fn == b.fn;
  return false;
}

}  // namespace loom::chat
