// comma_list.hpp: the entries of a comma-separated option ("a, b,c"), each with the spaces
// and tabs around it removed. Empty entries are kept: each option says what one means (skipped
// in `extensions`, refused in criteo_tsv's `files` and `table_rows`). Header-only, torch-free.
#pragma once

#include <string>
#include <vector>

namespace loom::data {

inline std::vector<std::string> split_comma_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(std::move(item));
    start = end + 1;
  }
  return out;
}

}  // namespace loom::data
