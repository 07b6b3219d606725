#include "config/options.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/failure.hpp"

namespace loom {

std::string to_toml_text(const toml::node& node) {
  // No multi-line strings: toml++ 3.3.0 writes a string that begins with a newline as """\n...""",
  // and TOML drops a newline right after the opening """ (found by the manifest fuzz target,
  // tests/fuzz/regressions/manifest/multiline-string-leading-newline.toml). Escapes keep it.
  constexpr auto flags = (toml::toml_formatter::default_flags & ~toml::format_flags::allow_literal_strings &
                          ~toml::format_flags::allow_multi_line_strings) |
                         toml::format_flags::relaxed_float_precision;
  std::ostringstream out;
  out << toml::toml_formatter(node, flags);
  return out.str();
}

toml::array toml_array(const std::vector<std::string>& items) {
  toml::array out;
  for (const std::string& item : items) out.push_back(item);
  return out;
}

std::string format_option_value(const OptionValue& value) {
  return std::visit(
      [](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) return to_toml_text(toml_array(v));
        else return to_toml_text(toml::value<T>(v));
      },
      value);
}

std::string source_position(const toml::source_region& src) {
  std::ostringstream out;
  out << (src.path ? *src.path : std::string("<manifest>"));
  // A --set value's origin is "--set KEY" (manifest.cpp); its line:col would be meaningless.
  const bool from_override = src.path && src.path->rfind("--set ", 0) == 0;
  if (src.begin.line > 0 && !from_override) out << ':' << src.begin.line << ':' << src.begin.column;
  return out.str();
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Converts a manifest value to the declared type, or returns nullopt when it does not fit.
std::optional<OptionValue> convert(const toml::node& node, const OptionSpec& spec) {
  if (spec.list) {
    const toml::array* array = node.as_array();
    if (array == nullptr) return std::nullopt;
    std::vector<std::string> out;
    for (const toml::node& item : *array) {
      const auto text = item.value_exact<std::string>();
      if (!text) return std::nullopt;
      out.push_back(*text);
    }
    return out;
  }
  switch (spec.type) {
    case LOOM_OPTION_TYPE_INT:
      if (auto v = node.value_exact<int64_t>()) return *v;
      break;
    case LOOM_OPTION_TYPE_FLOAT:
      if (auto v = node.value_exact<double>()) return *v;
      if (auto v = node.value_exact<int64_t>()) return static_cast<double>(*v);
      break;
    case LOOM_OPTION_TYPE_BOOL:
      if (auto v = node.value_exact<bool>()) return *v;
      break;
    case LOOM_OPTION_TYPE_STRING:
      if (auto v = node.value_exact<std::string>()) return *v;
      break;
  }
  return std::nullopt;
}

std::string node_text(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

const char* toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::string: return "string";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "date/time";
  }
}

}  // namespace

std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(key, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best.empty() ? "" : "; did you mean \"" + best + "\"?";
}

std::map<std::string, OptionValue> resolve_options(const toml::table& table,
                                                    const std::vector<OptionSpec>& specs,
                                                    const std::string& who,
                                                    const std::string& describe_hint,
                                                    const std::vector<std::string>& reserved) {
  std::map<std::string, OptionValue> values;
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);

  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (std::find(reserved.begin(), reserved.end(), name) != reserved.end()) continue;
    auto spec = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      throw usage_failure(source_position(key.source()) + ": " + who + ": unknown option \"" + name + "\"" +
                          did_you_mean(name, names) + " (known: " + (known.empty() ? "none" : known) +
                          "; " + describe_hint + ")");
    }
    auto value = convert(node, *spec);
    if (!value)
      throw usage_failure(source_position(node) + ": " + who + ": option \"" + name + "\" must be " +
                          (spec->list ? std::string("an array of strings") : option_type_name(spec->type)) +
                          ", not " + toml_type_name(node) + (spec->list && node.is_array() ? " holding other values" : "") + " (" +
                          describe_hint + ")");
    // No option of any component means anything by NaN or infinity (TOML allows nan and inf).
    if (const double* d = std::get_if<double>(&*value); d && !std::isfinite(*d))
      throw usage_failure(source_position(node) + ": " + who + ": option \"" + name + "\" is " + node_text(*d) +
                          "; it must be a finite number (" + describe_hint + ")");
    values[name] = *value;
  }
  for (const auto& spec : specs) {
    if (values.count(spec.name)) continue;
    if (spec.required)
      throw usage_failure(source_position(table) + ": " + who + ": missing required option \"" + spec.name +
                          "\" (" + option_type_name(spec) + ": " + spec.doc + "); add " + spec.name +
                          " = ... to this table");
    if (spec.default_text) values[spec.name] = parse_default(spec);
  }
  return values;
}

}  // namespace loom
