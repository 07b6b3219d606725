#include "abi/option_spec.hpp"

#include <stdexcept>

namespace loom {

const char* option_type_name(loom_option_type type) {
  switch (type) {
    case LOOM_OPTION_TYPE_INT: return "int";
    case LOOM_OPTION_TYPE_FLOAT: return "float";
    case LOOM_OPTION_TYPE_BOOL: return "bool";
    case LOOM_OPTION_TYPE_STRING: return "string";
  }
  return "unknown";
}

std::string option_type_name(const OptionSpec& spec) {
  return spec.list ? "strings" : option_type_name(spec.type);
}

OptionValue parse_default(const OptionSpec& spec) {
  const std::string& text = *spec.default_text;
  if (spec.list) {
    if (text != "[]") throw std::invalid_argument(text);
    return std::vector<std::string>();
  }
  size_t used = 0;
  switch (spec.type) {
    case LOOM_OPTION_TYPE_INT: {
      const int64_t v = std::stoll(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
      return v;
    }
    case LOOM_OPTION_TYPE_FLOAT: {
      const double v = std::stod(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
      return v;
    }
    case LOOM_OPTION_TYPE_BOOL:
      if (text == "true") return true;
      if (text == "false") return false;
      throw std::invalid_argument(text);
    case LOOM_OPTION_TYPE_STRING: return text;
  }
  throw std::invalid_argument(text);
}

}  // namespace loom
