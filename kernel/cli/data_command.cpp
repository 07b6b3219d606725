// data_command.cpp: `host data inspect PATH`: what a Parquet or Arrow corpus holds, before a
// manifest is written for it: its files, schema, row groups and rows, a few rows as Arrow prints
// them, tokens per row with a tokenizer, and the [data] table that trains on it. Reads only the
// first part of each of the first files for the rows and the token counts.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "base/failure.hpp"
#include "cli/commands.hpp"

#ifdef LOOM_WITH_ARROW
#include "formats/format_error.hpp"
#include "formats/table_file.hpp"
#include "formats/table_paths.hpp"
#include "tokenizer/tokenizer.hpp"
#endif

namespace loom {

#ifdef LOOM_WITH_ARROW
namespace {

constexpr size_t kShownChars = 160;  // of each printed value
constexpr size_t kCountedFiles = 8;  // files whose first part's rows are tokenized
constexpr size_t kCountedRows = 2000;

std::string mib(uint64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (bytes < (1 << 20)) out << double(bytes) / 1024 << " KiB";
  else out << double(bytes) / (1 << 20) << " MiB";
  return out.str();
}

std::string shortened(std::string value) {
  for (char& c : value)
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  if (value.size() > kShownChars) value = value.substr(0, kShownChars) + "... (" + std::to_string(value.size()) + " chars)";
  return value;
}

const char* kind_name(formats::ColumnKind kind) {
  switch (kind) {
    case formats::ColumnKind::text: return "text";
    case formats::ColumnKind::token_ids: return "token ids";
    case formats::ColumnKind::other: return "-";
  }
  return "";
}

std::string part_name(formats::TableFormat f) { return f == formats::TableFormat::parquet ? "row group" : "record batch"; }

// The column a manifest would read: --column, else "text" when it is one, else the first text
// column, else the first token-id column.
std::string chosen_column(const formats::TableInfo& info, const std::string& asked) {
  if (!asked.empty()) return asked;
  for (const auto& c : info.columns)
    if (c.name == "text" && c.kind == formats::ColumnKind::text) return c.name;
  for (const auto kind : {formats::ColumnKind::text, formats::ColumnKind::token_ids})
    for (const auto& c : info.columns)
      if (c.kind == kind) return c.name;
  return "";
}

void print_token_counts(const std::vector<formats::TableFile>& tables, const std::string& column, const CommandLine& line) {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  const bool text = tables[0].info().columns[tables[0].column(column)].kind == formats::ColumnKind::text;
  if (text && line.tokenizer.empty()) {
    std::cout << "tokens per row: give --tokenizer DIR (the model's tokenizer) to count them\n";
    return;
  }
  if (text) tokenizer = tok::load_tokenizer(line.tokenizer);
  uint64_t rows = 0, tokens = 0, least = UINT64_MAX, most = 0, all_rows = 0;
  for (size_t f = 0; f < tables.size(); ++f) {
    all_rows += tables[f].info().rows;
    if (f >= kCountedFiles || tables[f].info().part_rows.empty() || rows >= kCountedRows) continue;
    std::vector<uint64_t> counts;
    if (text) {
      for (const auto& row : tables[f].read_text(0, column).rows) counts.push_back(tokenizer->encode(row, false).size());
    } else {
      const auto ids = tables[f].read_ids(0, column);
      for (size_t i = 0; i < ids.size(); ++i) counts.push_back(ids.offsets[i + 1] - ids.offsets[i]);
    }
    for (size_t i = 0; i < counts.size() && rows < kCountedRows; ++i, ++rows) {
      tokens += counts[i];
      least = std::min(least, counts[i]);
      most = std::max(most, counts[i]);
    }
  }
  if (rows == 0) return;
  const double mean = double(tokens) / double(rows);
  std::cout << "tokens per row of \"" << column << "\" (" << rows << " rows read): mean " << std::fixed << std::setprecision(1) << mean
            << ", min " << least << ", max " << most << "; about " << std::setprecision(0) << mean * double(all_rows)
            << " tokens in all\n";
}

}  // namespace

int command_data_inspect(const CommandLine& line) {
  const std::string& path = line.args.at(0);
  try {
    const std::vector<std::string> files = formats::resolve_table_paths(path);
    std::vector<formats::TableFile> tables;
    uint64_t rows = 0, bytes = 0, parts = 0;
    for (const auto& f : files) {
      tables.push_back(formats::TableFile::open(f));
      rows += tables.back().info().rows;
      bytes += tables.back().info().bytes;
      parts += tables.back().info().part_rows.size();
    }
    const formats::TableInfo& first = tables[0].info();
    std::cout << path << ": " << files.size() << " file(s), " << rows << " rows in " << parts << " row groups or record batches, "
              << mib(bytes) << "\n";
    for (const auto& t : tables) {
      const auto& i = t.info();
      std::cout << "  " << i.path << ": " << formats::table_format_name(i.format) << ", " << i.rows << " rows, " << i.part_rows.size()
                << " " << part_name(i.format) << "(s), " << mib(i.bytes) << "\n";
      if (&t - &tables[0] == 9 && tables.size() > 11) {
        std::cout << "  ... " << tables.size() - 11 << " more\n";
        break;
      }
    }
    std::cout << "columns (text is tokenized, token ids are taken as they are, - cannot be trained on):\n";
    for (const auto& c : first.columns) std::cout << "  " << std::left << std::setw(24) << c.name << std::setw(32) << c.type << kind_name(c.kind) << "\n";
    for (const auto& t : tables) {
      std::vector<std::string> a, b;
      for (const auto& c : t.info().columns) a.push_back(c.name + " " + c.type);
      for (const auto& c : first.columns) b.push_back(c.name + " " + c.type);
      if (a != b) std::cout << "note: " << t.info().path << " has other columns than " << first.path << "\n";
    }
    if (!first.part_rows.empty()) {
      const auto shown = tables[0].preview(0, size_t(std::max(0, line.rows)));
      std::cout << "first " << shown.size() << " row(s) of " << first.path << ":\n";
      for (size_t r = 0; r < shown.size(); ++r)
        for (size_t c = 0; c < shown[r].size(); ++c)
          std::cout << (c == 0 ? "  [" + std::to_string(r) + "] " : "      ") << first.columns[c].name << " = " << shortened(shown[r][c]) << "\n";
    }
    const std::string column = chosen_column(first, line.column);
    if (column.empty()) {
      std::cout << "no column holds text or token ids: the parquet dataset cannot train on these files\n";
      return 0;
    }
    print_token_counts(tables, column, line);
    std::cout << "manifest:\n  [data]\n  use = \"parquet\"\n  path = \"" << path << "\"\n  column = \"" << column << "\"\n";
    if (first.columns[tables[0].column(column)].kind == formats::ColumnKind::text)
      std::cout << "  tokenizer = \"" << (line.tokenizer.empty() ? "MODEL_FOLDER" : line.tokenizer) << "\"\n";
    return 0;
  } catch (const formats::FormatError& e) {
    throw usage_failure(std::string("data inspect: ") + e.what());
  } catch (const tok::TokenizerError& e) {
    throw usage_failure(std::string("data inspect: tokenizer: ") + e.what());
  }
}

#else

int command_data_inspect(const CommandLine&) {
  throw usage_failure("data inspect: this host was built without Parquet and Arrow support (no pyarrow where it was "
                      "configured: cmake/LoomArrow.cmake); build it with tools/dev, which installs pyarrow");
}

#endif

}  // namespace loom
