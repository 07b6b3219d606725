// options.hpp: checks a manifest table against declared options (abi/option_spec.hpp), fills in
// defaults, and the TOML text and source positions that messages quote.
#pragma once

#include <map>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "abi/option_spec.hpp"

namespace loom {

// A list of strings as a TOML array.
toml::array toml_array(const std::vector<std::string>& items);
// The TOML literal for a value: 3, 0.001, true, "text", ["a", "b"].
std::string format_option_value(const OptionValue& value);

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

