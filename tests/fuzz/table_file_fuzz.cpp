// table_file_fuzz.cpp: the Parquet and Arrow reader, formats/table_file.hpp TableFile, whose
// parsing is Apache Arrow's own (libparquet, libarrow) behind Loom's wrapper.
//
// The input is a whole file: Parquet, an Arrow IPC file or an Arrow IPC stream (TableFile tells
// them apart by content, as for a real file). Documented refusal: loom::formats::FormatError.
// For a file that opens, every part's every text and token-id column is read, and every row as
// JSON (the sft dataset's path), and what it promises must hold: rows read plus nulls equal the part's row count, and
// a token-id row's offsets lie inside its values.
#include <cstdint>
#include <string>

#include "formats/format_error.hpp"
#include "formats/table_file.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom_fuzz::expect_only<loom::formats::FormatError>("TableFile", [&] {
    const auto table = loom::formats::TableFile::from_bytes("input", std::string(reinterpret_cast<const char*>(data), size));
    const loom::formats::TableInfo& info = table.info();
    unsigned sum = 0;
    // A hostile footer may claim many parts; each is still read, but only the first few.
    for (size_t part = 0; part < info.part_rows.size() && part < 8; ++part) {
      for (const auto& column : info.columns) {
        try {
          if (column.kind == loom::formats::ColumnKind::text) {
            const auto rows = table.read_text(part, column.name);
            if (rows.rows.size() + rows.nulls != info.part_rows[part]) loom_fuzz::finding("text rows and nulls differ from the part's rows");
            for (const auto& r : rows.rows) sum += unsigned(r.size()) + (r.empty() ? 0u : unsigned(uint8_t(r.back())));
          } else if (column.kind == loom::formats::ColumnKind::token_ids) {
            const auto ids = table.read_ids(part, column.name);
            if (ids.size() + ids.nulls != info.part_rows[part]) loom_fuzz::finding("id rows and nulls differ from the part's rows");
            if (ids.offsets.back() != ids.values.size()) loom_fuzz::finding("id offsets do not end at the values' end");
            for (const int64_t v : ids.values) sum += unsigned(v);
          }
        } catch (const loom::formats::FormatError&) {
          // One column refused (nulls only, a negative id): the others are still read.
        }
      }
      for (const auto& row : table.preview(part, 2))
        for (const auto& value : row) sum += unsigned(value.size());
      try {
        const auto rows = table.read_json(part);
        if (rows.size() != info.part_rows[part]) loom_fuzz::finding("read_json gave another number of rows than the part's");
        for (const auto& r : rows) sum += unsigned(r.size());
      } catch (const loom::formats::FormatError&) {
        // A column JSON cannot hold (binary, a map): refused by name.
      }
    }
    loom_fuzz::keep(sum);
  });
  return 0;
}
