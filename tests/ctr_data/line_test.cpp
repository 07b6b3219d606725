// The Criteo line parser (plugins/datasets/criteo_tsv/criteo_line.hpp) against hand-computed
// fields: dense values, hashed rows (recomputed here from the published SplitMix64 generator),
// empty and multi-id cells, and the exact message of every malformed line.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "plugins/datasets/criteo_tsv/criteo_line.hpp"
#include "plugins/datasets/common/data_error.hpp"

using namespace loom::criteo;

namespace {

// SplitMix64 as Vigna publishes it (state advanced by the golden gamma, then mixed): the
// row of id v in feature f is its (f + 1)-th output when seeded with v.
uint64_t splitmix64_output(uint64_t seed, int n) {
  uint64_t state = seed, z = 0;
  for (int i = 0; i < n; ++i) {
    state += 0x9E3779B97F4A7C15ULL;
    z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z = z ^ (z >> 31);
  }
  return z;
}
int64_t expected_row(uint64_t id, int feature, uint64_t rows) {
  return int64_t(splitmix64_output(id, feature + 1) % rows);
}

// 3 dense and 4 categorical features; C2 takes at most 2 ids in the error tests.
LineFormat small_format(int64_t max_ids = 64) {
  LineFormat f;
  f.dense = 3;
  f.sparse = 4;
  f.table_rows = {1000, 7, 1, uint64_t(1) << 40};
  f.max_ids_per_feature = max_ids;
  return f;
}

Sample parse(const std::string& line, const LineFormat& f = small_format()) {
  Sample s;
  parse_line(line, f, "day_0.tsv", 7, s);
  return s;
}

std::string error_of(const std::string& line, const LineFormat& f = small_format()) {
  try {
    parse(line, f);
  } catch (const loom::data::DataError& e) {
    CHECK(e.kind() == loom::data::DataError::Kind::bad_input);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("splitmix64 is the published mix: seed 0 gives 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4") {
  CHECK(splitmix64(kGoldenGamma) == 0xE220A8397B1DCDAFULL);
  CHECK(splitmix64(2 * kGoldenGamma) == 0x6E789E6AA1B965F4ULL);
  CHECK(splitmix64_output(0, 1) == 0xE220A8397B1DCDAFULL);  // the test's own generator agrees
  for (uint64_t id : {uint64_t(0), uint64_t(1), uint64_t(0xdeadbeef), ~uint64_t(0)})
    for (int f = 0; f < 30; ++f)
      for (uint64_t rows : {uint64_t(1), uint64_t(97), uint64_t(100000), uint64_t(1) << 62})
        CHECK(hashed_row(id, f, rows) == expected_row(id, f, rows));
}

TEST_CASE("a line's fields: label, log(1 + x) dense values, empty cells, one and several hex ids") {
  const Sample s = parse("1\t5\t\t-3\tA1b2\t\tff,0,FFFFFFFFFFFFFFFF\t12345678");
  CHECK(s.label == 1);
  REQUIRE(s.dense.size() == 3);
  CHECK(s.dense[0] == float(std::log1p(5.0)));
  CHECK(s.dense[0] == doctest::Approx(std::log(6.0)).epsilon(1e-6));
  CHECK(s.dense[1] == 0.0f);  // empty
  CHECK(s.dense[2] == 0.0f);  // negative, clipped as DLRM does
  const std::vector<int64_t> ids = {expected_row(0xA1B2, 0, 1000), 0, 0, 0, expected_row(0x12345678, 3, uint64_t(1) << 40)};
  CHECK(s.ids == ids);
  CHECK(s.id_ends == std::vector<int64_t>{1, 1, 4, 5});  // C2 empty, C3 three ids
  CHECK(ids[0] == int64_t(splitmix64(0xA1B2 + kGoldenGamma) % 1000));
}

TEST_CASE("parse_line reuses its sample, accepts CRLF, an all-empty line and the int64 extremes") {
  Sample s = parse("1\t1\t2\t3\t1\t2,3\t4\t5");
  parse_line("0\t\t\t\t\t\t\t\r", small_format(), "x.tsv", 1, s);
  CHECK(s.label == 0);
  CHECK(s.dense == std::vector<float>{0, 0, 0});
  CHECK(s.ids.empty());
  CHECK(s.id_ends == std::vector<int64_t>{0, 0, 0, 0});
  const Sample big = parse("0\t9223372036854775807\t-9223372036854775808\t0\t\t\t\t");
  CHECK(big.dense[0] == float(std::log1p(9223372036854775807.0)));
  CHECK(big.dense[1] == 0.0f);
  CHECK(big.dense[2] == 0.0f);
  const Sample upper = parse("0\t\t\t\tABCDEF\t\t\t");
  const Sample lower = parse("0\t\t\t\tabcdef\t\t\t");
  CHECK(upper.ids == lower.ids);
}

TEST_CASE("every malformed line gives one message naming file:line, the column where one cell is wrong, and the fix") {
  CHECK(error_of("1\t5\t\t-3\tA1b2\t\tff") ==
        "day_0.tsv:7: 7 tab-separated columns, expected 8 (label, 3 dense, 4 categorical); set dense_features and "
        "sparse_features to the file's layout");
  CHECK(error_of("1 5 0 0 a b c d") ==
        "day_0.tsv:7: 1 tab-separated columns, expected 8 (label, 3 dense, 4 categorical); set dense_features and "
        "sparse_features to the file's layout");
  CHECK(error_of("") == "day_0.tsv:7: empty line; every line holds 8 tab-separated columns (label, 3 dense, 4 categorical)");
  CHECK(error_of("\r") == error_of(""));
  CHECK(error_of("2\t\t\t\t\t\t\t") ==
        "day_0.tsv:7:1: label \"2\" is not 0 or 1; the first column must be the click label");
  CHECK(error_of("\t\t\t\t\t\t\t") == "day_0.tsv:7:1: label \"\" is not 0 or 1; the first column must be the click label");
  CHECK(error_of("\x01\t\t\t\t\t\t\t") ==
        "day_0.tsv:7:1: label \"\\x01\" is not 0 or 1; the first column must be the click label");
  CHECK(error_of("1\t5\t1.5\t\t\t\t\t") ==
        "day_0.tsv:7:5: dense feature I2 \"1.5\" is not a 64-bit decimal integer; write an integer or leave the cell "
        "empty");
  CHECK(error_of("1\t-\t\t\t\t\t\t") ==
        "day_0.tsv:7:3: dense feature I1 \"-\" is not a 64-bit decimal integer; write an integer or leave the cell "
        "empty");
  CHECK(error_of("1\t\t\t9223372036854775808\t\t\t\t") ==
        "day_0.tsv:7:5: dense feature I3 \"9223372036854775808\" is not a 64-bit decimal integer; write an integer "
        "or leave the cell empty");
  CHECK(error_of("0\t\t\t\tabc\t\t0x12\t") ==
        "day_0.tsv:7:11: categorical feature C3 id \"0x12\" is not 1 to 16 hex digits; write ids as hex strings, "
        "several separated by ','");
  CHECK(error_of("0\t\t\t\t\t\t1,zz\t") ==
        "day_0.tsv:7:10: categorical feature C3 id \"zz\" is not 1 to 16 hex digits; write ids as hex strings, "
        "several separated by ','");
  CHECK(error_of("0\t\t\t\t\t\ta,,b\t") ==
        "day_0.tsv:7:10: categorical feature C3 id \"\" is not 1 to 16 hex digits; write ids as hex strings, several "
        "separated by ','");
  CHECK(error_of("0\t\t\t\t\t\t\t1,") ==
        "day_0.tsv:7:11: categorical feature C4 id \"\" is not 1 to 16 hex digits; write ids as hex strings, several "
        "separated by ','");
  CHECK(error_of("0\t\t\t\t10000000000000000\t\t\t") ==
        "day_0.tsv:7:6: categorical feature C1 id \"10000000000000000\" is not 1 to 16 hex digits; write ids as hex "
        "strings, several separated by ','");
  CHECK(error_of("0\t\t\t\t\t1,2,3\t\t", small_format(2)) ==
        "day_0.tsv:7:7: categorical feature C2 holds 3 ids, more than max_ids_per_feature = 2; raise "
        "max_ids_per_feature or shorten the cell");
  CHECK(error_of("0\t\t\t\t\t1,2\t\t", small_format(2)).empty());
  const std::string long_cell(40, 'g');
  CHECK(error_of("0\t\t\t\t" + long_cell + "\t\t\t") ==
        "day_0.tsv:7:6: categorical feature C1 id \"gggggggggggggggggggggggggggggggg...\" is not 1 to 16 hex digits; "
        "write ids as hex strings, several separated by ','");
}

TEST_CASE("a line over 1 MiB is refused before it is parsed") {
  CHECK(error_of(std::string(kMaxLineBytes + 1, 'x')) ==
        "day_0.tsv:7: the line is longer than 1 MiB (1048576 bytes); Criteo lines are a few hundred bytes, so this is "
        "not a Criteo TSV file or its lines lack newlines");
  // Exactly 1 MiB is allowed (here it fails later, on its columns).
  CHECK(error_of(std::string(kMaxLineBytes, 'x')).find("tab-separated columns") != std::string::npos);
}
