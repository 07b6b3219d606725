// options.hpp: declared component options (from loom_option_spec), their validation against a
// manifest table, and the resolved values a component reads through loom_config.
#pragma once

#include <loom/core.h>

#include <map>
#include <optional>
#include <string>
#include <toml++/toml.h>
#include <variant>
#include <vector>

namespace loom {

struct OptionSpec {
  std::string name;
  loom_option_type type = LOOM_OPTION_TYPE_STRING;
  std::optional<std::string> default_text;  // as declared: "1e-3", "true", raw string
  bool required = false;
  std::string doc;
};

using OptionValue = std::variant<int64_t, double, bool, std::string>;

const char* option_type_name(loom_option_type type);
// The TOML literal for a value: 3, 0.001, true, "text".
std::string format_option_value(const OptionValue& value);
// Parses a declared default; throws std::invalid_argument when the text does not fit the type.
OptionValue parse_default(const OptionSpec& spec);

// "file:line:col" of a manifest node or key ("<manifest>" when toml++ has no source).
std::string source_position(const toml::source_region& source);
inline std::string source_position(const toml::node& node) { return source_position(node.source()); }
// TOML text as Loom writes it: double-quoted strings, shortest round-trip floats.
std::string to_toml_text(const toml::node& node);
// "; did you mean \"lr\"?" when a candidate is close to key, else "".
std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates);

// Validates every key of table (except those in `reserved`) against specs and fills in defaults.
// `who` names the slot and component for messages, e.g. "[optimizer] adamw".
// Throws a usage Failure naming file:line:col and the fix.
std::map<std::string, OptionValue> resolve_options(const toml::table& table,
                                                    const std::vector<OptionSpec>& specs,
                                                    const std::string& who,
                                                    const std::string& describe_hint,
                                                    const std::vector<std::string>& reserved);

}  // namespace loom

// The C ABI's opaque config handle: one component's resolved options.
struct loom_config {
  std::map<std::string, loom::OptionValue> values;
};
