// criteo_line.cpp: the Criteo line parser and its hashing (criteo_line.hpp has the format).
#include "criteo_line.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "plugins/datasets/common/data_error.hpp"

namespace loom::criteo {

namespace {

using loom::data::bad_input;

// A cell as it appears in a message: at most 32 bytes, anything unprintable as \xNN, so a
// binary file still gives a one-line error.
std::string quoted(std::string_view cell) {
  std::string out = "\"";
  const size_t shown = std::min<size_t>(cell.size(), 32);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(cell[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out.push_back(char(c));
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    }
  }
  return out + (shown < cell.size() ? "...\"" : "\"");
}

std::string at(const std::string& file, uint64_t line_no) { return file + ":" + std::to_string(line_no); }
std::string at(const std::string& file, uint64_t line_no, size_t column) {
  return at(file, line_no) + ":" + std::to_string(column + 1);
}

// A decimal integer with an optional '-', within int64; false for anything else.
bool parse_int(std::string_view s, int64_t& out) {
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + uint64_t(c - '0');  // 19 digits cannot overflow uint64
  }
  const uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
  if (v > limit) return false;
  out = negative ? int64_t(0 - v) : int64_t(v);
  return true;
}

// 1 to 16 hex digits, either case; false for anything else.
bool parse_hex(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    unsigned digit;
    if (c >= '0' && c <= '9') digit = unsigned(c - '0');
    else if (c >= 'a' && c <= 'f') digit = unsigned(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') digit = unsigned(c - 'A' + 10);
    else return false;
    v = (v << 4) | digit;
  }
  out = v;
  return true;
}

}  // namespace

uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

int64_t hashed_row(uint64_t id, int64_t feature, uint64_t rows) {
  return int64_t(splitmix64(id + kGoldenGamma * uint64_t(feature + 1)) % rows);
}

float dense_value(int64_t x) { return x > 0 ? float(std::log1p(double(x))) : 0.0f; }

std::string overlong_line_message(const std::string& file, uint64_t line_no) {
  return at(file, line_no) + ": the line is longer than 1 MiB (" + std::to_string(kMaxLineBytes) +
         " bytes); Criteo lines are a few hundred bytes, so this is not a Criteo TSV file or its lines lack newlines";
}

void parse_line(std::string_view line, const LineFormat& format, const std::string& file, uint64_t line_no,
                Sample& out) {
  if (line.size() > kMaxLineBytes) throw bad_input(overlong_line_message(file, line_no));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const int64_t D = format.dense, S = format.sparse;
  const auto layout = [&] {  // for messages only: built when one is thrown
    return "label, " + std::to_string(D) + " dense, " + std::to_string(S) + " categorical";
  };
  if (line.empty())
    throw bad_input(at(file, line_no) + ": empty line; every line holds " + std::to_string(1 + D + S) +
                    " tab-separated columns (" + layout() + ")");
  const size_t columns = size_t(std::count(line.begin(), line.end(), '\t')) + 1;
  if (columns != size_t(1 + D + S))
    throw bad_input(at(file, line_no) + ": " + std::to_string(columns) + " tab-separated columns, expected " +
                    std::to_string(1 + D + S) + " (" + layout() +
                    "); set dense_features and sparse_features to the file's layout");

  size_t pos = 0, start = 0;
  const auto next_cell = [&] {
    size_t end = line.find('\t', pos);
    if (end == std::string_view::npos) end = line.size();
    start = pos;
    pos = end + 1;
    return line.substr(start, end - start);
  };

  const std::string_view label = next_cell();
  if (label != "0" && label != "1")
    throw bad_input(at(file, line_no, start) + ": label " + quoted(label) +
                    " is not 0 or 1; the first column must be the click label");
  out.label = label[0] - '0';

  out.dense.resize(size_t(D));
  for (int64_t d = 0; d < D; ++d) {
    const std::string_view cell = next_cell();
    int64_t x = 0;
    if (!cell.empty() && !parse_int(cell, x))
      throw bad_input(at(file, line_no, start) + ": dense feature I" + std::to_string(d + 1) + " " + quoted(cell) +
                      " is not a 64-bit decimal integer; write an integer or leave the cell empty");
    out.dense[size_t(d)] = dense_value(x);
  }

  out.ids.clear();
  out.id_ends.resize(size_t(S));
  for (int64_t f = 0; f < S; ++f) {
    const std::string_view cell = next_cell();
    if (!cell.empty()) {
      const int64_t count = int64_t(std::count(cell.begin(), cell.end(), ',')) + 1;
      if (count > format.max_ids_per_feature)
        throw bad_input(at(file, line_no, start) + ": categorical feature C" + std::to_string(f + 1) + " holds " +
                        std::to_string(count) + " ids, more than max_ids_per_feature = " +
                        std::to_string(format.max_ids_per_feature) + "; raise max_ids_per_feature or shorten the cell");
      size_t id_start = 0;
      while (id_start <= cell.size()) {
        size_t id_end = cell.find(',', id_start);
        if (id_end == std::string_view::npos) id_end = cell.size();
        const std::string_view id = cell.substr(id_start, id_end - id_start);
        uint64_t value = 0;
        if (!parse_hex(id, value))
          throw bad_input(at(file, line_no, start + id_start) + ": categorical feature C" + std::to_string(f + 1) +
                          " id " + quoted(id) +
                          " is not 1 to 16 hex digits; write ids as hex strings, several separated by ','");
        out.ids.push_back(hashed_row(value, f, format.table_rows[size_t(f)]));
        id_start = id_end + 1;
      }
    }
    out.id_ends[size_t(f)] = int64_t(out.ids.size());
  }
}

}  // namespace loom::criteo
