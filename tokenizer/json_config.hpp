// json_config.hpp: reading one component's settings out of tokenizer.json. Every error names the
// JSON path of the value (e.g. `pre_tokenizer.pretokenizers[1].behavior`), so a user can find
// what Loom refused in a 30 MB file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer_error.hpp"

namespace loom::tok {

using Json = nlohmann::json;

// The `type` of a component, or an error naming `where`.
inline std::string component_type(const Json& config, const std::string& where) {
  if (!config.is_object()) throw TokenizerError(where + " must be an object");
  const auto it = config.find("type");
  if (it == config.end() || !it->is_string()) throw TokenizerError(where + ".type is missing");
  return it->get<std::string>();
}

template <typename T>
T field_or(const Json& config, const char* key, T fallback, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw TokenizerError(where + "." + key + " has the wrong type (" + it->type_name() + ")");
  }
}

template <typename T>
T required_field(const Json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) throw TokenizerError(where + "." + key + " is missing");
  return field_or<T>(config, key, T{}, where);
}

inline const Json& required_array(const Json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_array()) throw TokenizerError(where + "." + key + " must be an array");
  return *it;
}

[[noreturn]] inline void unsupported(const std::string& where, const std::string& type) {
  throw TokenizerError(where + ".type \"" + type + "\" is not supported by Loom's tokenizer");
}

}  // namespace loom::tok
