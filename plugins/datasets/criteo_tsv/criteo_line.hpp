// criteo_line.hpp: one line of a Criteo-format TSV file, parsed into a sample. Torch-free and
// SDK-free, so the unit tests and the fuzz target call it directly.
//
// A line is `label \t I1 .. I{dense} \t C1 .. C{sparse}` (the Criteo Kaggle / Terabyte layout):
//   label        0 or 1
//   I1..         decimal integers (optional '-'), or empty; x becomes log(1 + x) for x > 0 and
//                0 for an empty cell or x <= 0, as float32: DLRM's Criteo preprocessing
//                (facebookresearch/dlrm: data_utils.py processCriteoAdData sets empty cells and
//                negatives to 0, dlrm_data_pytorch.py's collate takes log(x + 1))
//   C1..         zero ids (empty), one id, or several ids separated by ','; an id is 1 to 16
//                hex digits (either case), read as a uint64 value v
// Hashing: id v of categorical feature f (0-based) goes to row
//     splitmix64(v + 0x9E3779B97F4A7C15 * (f + 1)) % rows_f
// where splitmix64(z) is Vigna's SplitMix64 output mix (z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
// z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31). Equivalently: the (f + 1)-th output of a
// SplitMix64 generator seeded with v. A trailing '\r' (CRLF files) is ignored.
// Errors are bad_input DataErrors whose message starts with FILE:LINE (and :COLUMN, 1-based
// bytes, where one cell is at fault).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::criteo {

inline constexpr size_t kMaxLineBytes = size_t(1) << 20;  // without the '\n'
inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

struct LineFormat {
  int64_t dense = 13, sparse = 26;
  std::vector<uint64_t> table_rows;  // rows_f, one per categorical feature, each >= 1
  int64_t max_ids_per_feature = 64;
};

struct Sample {
  int64_t label = 0;
  std::vector<float> dense;       // `dense` values, transformed
  std::vector<int64_t> ids;       // hashed rows of all categorical features, feature after feature
  std::vector<int64_t> id_ends;   // id_ends[f]: end of feature f's rows in ids (`sparse` entries)
};

uint64_t splitmix64(uint64_t z);
int64_t hashed_row(uint64_t id, int64_t feature, uint64_t rows);
float dense_value(int64_t x);

// Parses `line` (without its '\n') of `file` at 1-based line number line_no into out, reusing
// out's buffers. Throws a bad_input loom::data::DataError naming file:line[:column] and the fix.
void parse_line(std::string_view line, const LineFormat& format, const std::string& file, uint64_t line_no,
                Sample& out);

// The error for a line longer than kMaxLineBytes (the reader meets it before parse_line can).
std::string overlong_line_message(const std::string& file, uint64_t line_no);

}  // namespace loom::criteo
