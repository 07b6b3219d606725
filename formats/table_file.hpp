// table_file.hpp: Parquet files and Arrow IPC files (the file format, and the stream format that
// Hugging Face datasets' save_to_disk writes), read through Apache Arrow's own C++ readers
// (libparquet, libarrow from the pyarrow wheel; cmake/LoomArrow.cmake). No Arrow header leaks
// out of here: callers see rows of text or of token ids.
//
// A table is read part by part: a Parquet row group or an Arrow record batch, the units a
// corpus is streamed and split across ranks by. The file is memory-mapped (formats/files.hpp:
// a regular file only, opened without blocking), every part read is validated in full by Arrow
// before any value is trusted, and every failure, Arrow's own included, is one FormatError
// naming the file, the part or column, and the fix. A part of more than 4 Mi rows, or a table
// without columns, is refused: a part is read whole. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::formats {

enum class TableFormat { parquet, arrow_file, arrow_stream };
const char* table_format_name(TableFormat format);  // "Parquet", "Arrow IPC file", "Arrow IPC stream"

// How a column can feed a language model: text to tokenize, token ids taken as they are, or
// neither (read by `host data inspect` only).
enum class ColumnKind { text, token_ids, other };

struct TableColumn {
  std::string name;
  std::string type;  // Arrow's spelling: "string", "list<item: int32>", ...
  ColumnKind kind = ColumnKind::other;
};

struct TableInfo {
  std::string path;
  TableFormat format = TableFormat::parquet;
  uint64_t bytes = 0;
  uint64_t rows = 0;
  std::vector<uint64_t> part_rows;  // each row group's (Parquet) or record batch's (Arrow) rows
  std::vector<TableColumn> columns;
};

// The text of one part's column; rows that are null are left out and counted.
struct TextRows {
  std::vector<std::string> rows;
  uint64_t nulls = 0;
};

// The token ids of one part's column, row i being values[offsets[i], offsets[i + 1]).
struct IdRows {
  std::vector<int64_t> values;
  std::vector<uint64_t> offsets{0};
  uint64_t nulls = 0;
  size_t size() const { return offsets.size() - 1; }
};

class TableFile {
 public:
  // Opens a file by its content: "PAR1" at both ends is Parquet, "ARROW1" first an Arrow IPC
  // file, anything else is tried as an Arrow IPC stream. Reads the footer or schema and every
  // part's row count (a stream's batches are walked once). Throws FormatError.
  static TableFile open(const std::string& path);
  // The same from bytes in memory (the fuzz target); `name` stands for the path in messages.
  static TableFile from_bytes(const std::string& name, std::string bytes);

  TableFile(TableFile&&) noexcept;
  TableFile& operator=(TableFile&&) noexcept;
  ~TableFile();

  const TableInfo& info() const;
  // The column's index in info().columns; throws FormatError naming the columns there are.
  size_t column(const std::string& name) const;

  // Part `part`'s rows of a text column (string, large_string or string_view). Throws
  // FormatError for another type, a part out of range, or values Arrow's validation refuses.
  TextRows read_text(size_t part, const std::string& column) const;
  // Part `part`'s rows of a token-id column (a list, large list or fixed-size list of
  // integers); an id below 0 is refused.
  IdRows read_ids(size_t part, const std::string& column) const;
  // Part `part`'s rows as JSON objects of every column (JSON text, nested values included), for
  // readers of JSON records; throws FormatError for a column JSON cannot hold.
  std::vector<std::string> read_json(size_t part) const;
  // The first `limit` rows of a part, each column's value printed by Arrow (for inspection).
  std::vector<std::vector<std::string>> preview(size_t part, size_t limit) const;

  // Hands the pages of what was read back to the kernel (MappedFile::release); a streamed
  // corpus calls it after each part so its resident set stays small.
  void release_pages() const;

 private:
  struct Impl;
  explicit TableFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::formats
