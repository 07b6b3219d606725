// builtins.hpp: what templates call by name, with the reference's behaviour: filters
// (`x | trim`), tests (`x is defined`), methods of strings and mappings (`s.startswith(...)`,
// `d.items()`), and the globals (raise_exception, namespace, range, strftime_now). An unknown
// name is a TemplateError naming it, so an unsupported construct is reported, never ignored.
#pragma once

#include <string>
#include <vector>

#include "value.hpp"

namespace loom::chat {

// `args`: positional arguments; `kwargs`: keyword arguments (an object value, or undefined).
Value apply_filter(const std::string& name, const Value& operand, const std::vector<Value>& args, const Value& kwargs);
bool apply_test(const std::string& name, const Value& operand, const std::vector<Value>& args);
bool has_test(const std::string& name);
// A member of `object` by name: a mapping's entry, a string's method or length, or undefined.
Value member_of(const Value& object, const std::string& name);
// The global functions and constants every render starts with.
Object globals();

}  // namespace loom::chat
