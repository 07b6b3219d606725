// value.hpp: the runtime values of Loom's chat template interpreter. They follow the reference
// implementation (@huggingface/jinja) rather than Python's Jinja where the two differ, because
// identical output to that reference is what the tests prove: objects keep insertion order and
// compare by identity, `{{ }}` of a list or mapping prints its JSON, a float prints "1.0".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace loom::chat {

struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // insertion order, like a JavaScript Map
using Function = std::function<Value(std::vector<Value>& args)>;

struct Value {
  enum class Type { undefined, none, boolean, integer, floating, string, array, object, ns, kwargs, function };
  Type type = Type::undefined;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
  std::shared_ptr<Array> array;     // array
  std::shared_ptr<Object> object;   // object, ns (namespace), kwargs (keyword arguments of a call)
  std::shared_ptr<Function> fn;     // function

  static Value none() { return make(Type::none); }
  static Value boolean(bool v) { Value x = make(Type::boolean); x.b = v; return x; }
  static Value integer(int64_t v) { Value x = make(Type::integer); x.i = v; return x; }
  static Value floating(double v) { Value x = make(Type::floating); x.d = v; return x; }
  static Value string(std::string v) { Value x = make(Type::string); x.s = std::move(v); return x; }
  static Value list(Array items = {}) { Value x = make(Type::array); x.array = std::make_shared<Array>(std::move(items)); return x; }
  static Value mapping(Object items = {}, Type type = Type::object) {
    Value x = make(type);
    x.object = std::make_shared<Object>(std::move(items));
    return x;
  }
  static Value function(Function f) { Value x = make(Type::function); x.fn = std::make_shared<Function>(std::move(f)); return x; }

  bool is(Type t) const { return type == t; }
  bool is_number() const { return type == Type::integer || type == Type::floating; }
  bool is_mapping() const { return type == Type::object || type == Type::ns || type == Type::kwargs; }
  double number() const { return type == Type::floating ? d : type == Type::boolean ? (b ? 1 : 0) : static_cast<double>(i); }

  bool truthy() const;
  // What {{ value }} prints.
  std::string str() const;
  // A member of a mapping, or undefined.
  Value get(const std::string& key) const;
  void set(const std::string& key, Value value);

 private:
  static Value make(Type t) { Value x; x.type = t; return x; }
};

// JSON (the render context) to values; numbers keep integer or float.
Value from_json(const nlohmann::json& json);

// JSON text as the reference's tojson writes it (Python json.dumps separators; indent adds
// newlines; non-ASCII kept as is). undefined_as_null: undefined prints null (else undefined).
std::string to_json(const Value& value, int indent = 0, bool undefined_as_null = true, int depth = 0);

// Length in UTF-16 code units, as JavaScript counts string length.
int64_t js_length(const std::string& utf8);

// Loose equality of == and != in the reference (JavaScript's == on the underlying values):
// numbers and booleans by number, strings by text, null equals undefined, containers by identity.
bool loose_equal(const Value& a, const Value& b);

}  // namespace loom::chat
