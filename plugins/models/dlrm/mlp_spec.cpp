#include "mlp_spec.hpp"

#include <loom/plugin.hpp>

#include <cctype>
#include <limits>

namespace dlrm {

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  size_t i = 0;
  const auto fail = [&] {
    return loom::Error("dlrm: " + option + " = \"" + text + "\" must be positive integers separated by commas");
  };
  while (i <= text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    int64_t value = 0;
    const size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) throw fail();
      value = value * 10 + (text[i++] - '0');
    }
    if (i == start || value <= 0) throw fail();
    out.push_back(value);
    while (i < text.size() && text[i] == ' ') ++i;
    if (i == text.size()) break;
    if (text[i] != ',') throw fail();
    ++i;
  }
  return out;
}

std::vector<int64_t> table_rows(const std::string& text, int64_t tables) {
  std::vector<int64_t> rows = parse_int_list(text, "table_rows");
  if (rows.size() == 1) rows.assign(static_cast<size_t>(tables), rows.front());
  if (static_cast<int64_t>(rows.size()) != tables)
    throw loom::Error("dlrm: table_rows lists " + std::to_string(rows.size()) + " counts for " +
                      std::to_string(tables) + " sparse features; give one count, or one per feature");
  return rows;
}

}  // namespace dlrm
