// option_spec.hpp: a component's declared options (from loom_option_spec) and the resolved
// values it reads through the ABI's opaque loom_config. No TOML here: config/options.hpp
// checks manifest tables against these specs.
#pragma once

#include <loom/core.h>

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace loom {

struct OptionSpec {
  std::string name;
  loom_option_type type = LOOM_OPTION_TYPE_STRING;
  std::optional<std::string> default_text;  // as declared: "1e-3", "true", raw string
  bool required = false;
  std::string doc;
  // A TOML array of strings (type STRING): host tables only ([model] freeze, [lora] targets);
  // plugins cannot declare one. Its default is always the empty array.
  bool list = false;
};

using OptionValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>>;

const char* option_type_name(loom_option_type type);
// What `host describe` and messages call the spec's type: option_type_name, or "strings".
std::string option_type_name(const OptionSpec& spec);
// Parses a declared default; throws std::invalid_argument when the text does not fit the type.
OptionValue parse_default(const OptionSpec& spec);

}  // namespace loom

// The C ABI's opaque config handle: one component's resolved options.
struct loom_config {
  std::map<std::string, loom::OptionValue> values;
};
