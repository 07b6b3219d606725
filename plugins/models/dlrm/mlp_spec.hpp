// mlp_spec.hpp: the comma-separated integer lists of the dlrm options ("512,256,64" layer
// widths; "100000" or one row count per table).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlrm {

// Positive integers separated by commas (spaces allowed); throws loom::Error naming `option`.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& option);

// table_rows: one count for every table, or exactly `tables` counts.
std::vector<int64_t> table_rows(const std::string& text, int64_t tables);

}  // namespace dlrm
