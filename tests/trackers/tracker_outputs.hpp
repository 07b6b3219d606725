// tracker_outputs.hpp: reads back what the trackers wrote, independently of their code: an
// RFC 4180 CSV reader, a JSON Lines reader, and the TensorBoard check (check_tensorboard.py
// run by Debian's python3 on protoc-generated modules).
#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "run_host.hpp"

namespace loom_test {

namespace fs = std::filesystem;

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// Parses RFC 4180 text (quoted fields, doubled quotes, CRLF or LF). Throws on a quote in an
// unquoted field, an unterminated quote, a record of another width than the header, or a
// last record without its line break.
inline CsvTable read_csv(const fs::path& path) {
  const std::string text = read_file(path);
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;       // inside a quoted field
  bool raw = false;          // the current field has unquoted characters
  bool was_quoted = false;   // the current field was quoted and has closed
  bool open = false;         // a record has started since the last line break
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"') field += c;
      else if (i + 1 < text.size() && text[i + 1] == '"') field += text[++i];
      else quoted = false, was_quoted = true;
      continue;
    }
    open = true;
    if (c == '"') {
      if (raw || was_quoted) throw std::runtime_error(path.string() + ": stray quote in a field");
      quoted = true;
    } else if (c == ',') {
      record.push_back(field);
      field.clear();
      raw = was_quoted = false;
    } else if (c == '\n' || (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      if (c == '\r') ++i;
      record.push_back(field);
      records.push_back(record);
      record.clear();
      field.clear();
      raw = was_quoted = open = false;
    } else {
      if (was_quoted) throw std::runtime_error(path.string() + ": text after a closing quote");
      field += c;
      raw = true;
    }
  }
  if (quoted) throw std::runtime_error(path.string() + ": unterminated quote");
  if (open) throw std::runtime_error(path.string() + ": torn last record");
  CsvTable out;
  if (records.empty()) return out;
  out.header = records[0];
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != out.header.size())
      throw std::runtime_error(path.string() + ": record " + std::to_string(r) + " has " +
                               std::to_string(records[r].size()) + " fields, the header " +
                               std::to_string(out.header.size()));
    out.rows.push_back(records[r]);
  }
  return out;
}

// One JSON object per line, in file order, keys in file order.
inline std::vector<nlohmann::ordered_json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

template <class Rows, class StepOf>
std::vector<int64_t> steps_of(const Rows& rows, StepOf step_of) {
  std::vector<int64_t> out;
  for (const auto& r : rows) out.push_back(step_of(r));
  return out;
}

inline std::vector<int64_t> jsonl_steps(const fs::path& path) {
  return steps_of(read_jsonl(path), [](const nlohmann::ordered_json& j) { return j.at("step").get<int64_t>(); });
}

inline std::vector<int64_t> csv_steps(const fs::path& path) {
  return steps_of(read_csv(path).rows, [](const std::vector<std::string>& r) { return std::stoll(r.at(0)); });
}

inline bool strictly_increasing(const std::vector<int64_t>& v) {
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] <= v[i - 1]) return false;
  return true;
}

// Every csv row equals the jsonl record of the same line: same step, the same value in each
// column (a blank cell where the record lacks the metric), and no metric left out.
inline void check_csv_matches_jsonl(const fs::path& csv_path, const fs::path& jsonl_path) {
  const CsvTable csv = read_csv(csv_path);
  const auto jsonl = read_jsonl(jsonl_path);
  REQUIRE(!csv.header.empty());
  CHECK(csv.header[0] == "step");
  REQUIRE(csv.rows.size() == jsonl.size());
  for (size_t r = 0; r < jsonl.size(); ++r) {
    CAPTURE(r);
    CHECK(std::stoll(csv.rows[r][0]) == jsonl[r].at("step").get<int64_t>());
    size_t present = 0;
    for (size_t c = 1; c < csv.header.size(); ++c) {
      CAPTURE(csv.header[c]);
      const std::string& cell = csv.rows[r][c];
      if (!jsonl[r].contains(csv.header[c])) {
        CHECK(cell.empty());
        continue;
      }
      ++present;
      const auto& v = jsonl[r].at(csv.header[c]);
      if (v.is_null()) CHECK((cell == "nan" || cell == "inf" || cell == "-inf"));
      else CHECK(std::stod(cell) == v.get<double>());  // both round-trip: exact
    }
    CHECK(present + 1 == jsonl[r].size());  // every metric of the record has a column
  }
}

// The Python modules for the plugin's .proto files, generated once per test process.
inline std::string python_modules() {
  static const std::string dir = [] {
    const fs::path d = tmp_dir("tracker-pb-" + std::to_string(::getpid()));
    std::string cmd = std::string(LOOM_PROTOC) + " --proto_path=" + LOOM_TB_PROTO_DIR + " --python_out=" + d.string();
    for (const auto& e : fs::directory_iterator(LOOM_TB_PROTO_DIR))
      if (e.path().extension() == ".proto") cmd += " " + e.path().string();
    const Result r = run_shell(cmd);
    REQUIRE_MESSAGE(r.code == 0, "protoc failed: " << r.err);
    return d.string();
  }();
  return dir;
}

// Runs check_tensorboard.py on a run folder; extra: "--resumed-at 20 --files 2".
inline Result check_tensorboard(const fs::path& run_dir, const std::string& extra = "") {
  return run_shell(std::string(LOOM_PYTHON) + " " + LOOM_TB_CHECK + " --pb '" + python_modules() + "' --tb '" +
                   (run_dir / "tensorboard").string() + "' --jsonl '" + (run_dir / "metrics.jsonl").string() +
                   "' --manifest '" + (run_dir / "manifest.toml").string() + "' " + extra);
}

}  // namespace loom_test
