// pattern.hpp: the `pattern` object several tokenizer.json components share:
// {"String": "..."} matches that text, {"Regex": "..."} a JavaScript regular expression.
#pragma once

#include <memory>
#include <string>

#include "js_regex.hpp"
#include "json_config.hpp"

namespace loom::tok {

inline std::unique_ptr<JsRegex> make_pattern(const Json& config, const std::string& where) {
  if (!config.is_object()) throw TokenizerError(where + " must be an object");
  if (const auto it = config.find("String"); it != config.end() && it->is_string())
    return std::make_unique<JsRegex>(it->get<std::string>(), true, where);
  if (const auto it = config.find("Regex"); it != config.end() && it->is_string())
    return std::make_unique<JsRegex>(it->get<std::string>(), false, where);
  throw TokenizerError(where + " must hold \"String\" or \"Regex\"");
}

// Every match of `pattern` in `text` replaced by `content` (String.replaceAll).
std::string replace_all(const JsRegex& pattern, std::string_view text, const std::string& content);

}  // namespace loom::tok
