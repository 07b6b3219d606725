// host_table.hpp: a manifest table that the host itself reads ([run], [checkpoint], ...),
// declared once: each option is one row that binds its name and doc to the settings field it
// fills. The field's initializer in the settings struct is the default; the type comes from
// the field; `host describe` and README's reference are generated from the same rows.
//
//   HostTable<RunSettings> table{"run", "[run]", "The training run itself.", {
//       option("steps", &RunSettings::steps, "Optimizer steps to run.", at_least(1)),
//   }};
#pragma once

#include <functional>
#include <map>
#include <string>
#include <toml++/toml.h>
#include <type_traits>
#include <vector>

#include "base/failure.hpp"
#include "config/options.hpp"

namespace loom {

// A rule on a value; returns what is wrong ("must be at least 1") or "".
template <class T>
using Rule = std::function<std::string(const T&)>;

template <class T>
Rule<T> at_least(T minimum) {
  return [minimum](const T& v) {
    if (v >= minimum) return std::string();
    return minimum == T{} ? std::string("must be >= 0") : "must be at least " + format_option_value(minimum);
  };
}
template <class T>
Rule<T> above(T bound) {
  return [bound](const T& v) { return v > bound ? "" : "must be > " + format_option_value(bound); };
}
Rule<std::string> one_of(std::vector<std::string> choices);

template <class Settings>
struct HostOption {
  OptionSpec spec;  // default_text comes from a default-constructed Settings
  // Stores a resolved value in the field; `where` (file:line:col) and `who` ("[run]") name it
  // in the usage Failure thrown when a rule rejects it.
  std::function<void(Settings&, const OptionValue&, const std::string& where, const std::string& who)> store;
};

namespace detail {

template <class T>
constexpr loom_option_type option_type_of() {
  if constexpr (std::is_same_v<T, bool>) return LOOM_OPTION_TYPE_BOOL;
  else if constexpr (std::is_same_v<T, int64_t>) return LOOM_OPTION_TYPE_INT;
  else if constexpr (std::is_same_v<T, double>) return LOOM_OPTION_TYPE_FLOAT;
  else return LOOM_OPTION_TYPE_STRING;
}

// How `host describe` shows a default: strings bare, numbers as TOML writes them.
template <class T>
std::string default_text_of(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) return value;
  else return format_option_value(value);  // a list: "[]" (host list options default to empty; parse_default)
}

}  // namespace detail

// One row: name, the field it fills, its doc, and any rules the value must pass.
template <class Settings, class T>
HostOption<Settings> option(const char* name, T Settings::*field, const char* doc, std::vector<Rule<T>> rules = {}) {
  static_assert(std::is_same_v<T, bool> || std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                    std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<std::string>>,
                "a host option's field is bool, int64_t, double, std::string or a list of strings; use a custom "
                "HostOption otherwise");
  HostOption<Settings> out;
  out.spec.name = name;
  out.spec.type = detail::option_type_of<T>();
  out.spec.list = std::is_same_v<T, std::vector<std::string>>;
  out.spec.default_text = detail::default_text_of(Settings{}.*field);
  out.spec.doc = doc;
  out.store = [name, field, rules](Settings& s, const OptionValue& value, const std::string& where,
                                   const std::string& who) {
    const T& v = std::get<T>(value);
    for (const auto& rule : rules)
      if (const std::string wrong = rule(v); !wrong.empty())
        throw usage_failure(where + ": " + who + " " + name + " " + wrong);
    s.*field = v;
  };
  return out;
}

template <class Settings>
struct HostTable {
  const char* name;     // what `host describe` takes: "run"
  const char* title;    // how the manifest spells it: "[run]"
  const char* summary;  // one line for `host describe` and README
  std::vector<HostOption<Settings>> options;

  std::vector<OptionSpec> specs() const {
    std::vector<OptionSpec> out;
    for (const auto& o : options) out.push_back(o.spec);
    return out;
  }

  // Moves this table's options out of `values` (resolved against specs()) into `settings`.
  // table: where the values came from, for the positions in messages (may be null).
  void take(std::map<std::string, OptionValue>& values, const toml::table* table, Settings& settings) const {
    const std::string who = "[" + std::string(name) + "]";
    for (const auto& o : options) {
      const auto it = values.find(o.spec.name);
      if (it == values.end()) continue;
      const toml::node* node = table ? table->get(o.spec.name) : nullptr;
      const std::string where = node ? source_position(*node) : table ? source_position(*table) : who;
      o.store(settings, it->second, where, who);
      values.erase(it);
    }
  }
};

// A host table as `host describe` shows it, whatever settings it fills.
struct HostTableDoc {
  const char* name;
  const char* title;
  const char* summary;
  std::vector<OptionSpec> options;
};

}  // namespace loom
