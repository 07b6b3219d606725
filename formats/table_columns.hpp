// table_columns.hpp: Arrow arrays to the plain rows TableFile hands out (table_file.hpp). Private
// to formats/: the one place besides table_file.cpp that sees Arrow's headers. The arrays come
// validated in full (ValidateFull), so offsets and lengths may be trusted here; values are not.
#pragma once

#include <arrow/api.h>

#include <string>
#include <vector>

#include "formats/table_file.hpp"

namespace loom::formats {

// text: string, large_string, string_view; token_ids: a list, large list or fixed-size list of
// integers; anything else other.
ColumnKind column_kind(const arrow::DataType& type);

// The rows of a text column; null rows are counted, not returned. Throws FormatError when every
// row is null (the column holds no text: the wrong column, or a damaged file).
TextRows text_rows(const arrow::ChunkedArray& column, const std::string& path, const std::string& name);
// The rows of a token-id column; null rows are counted, not returned. Throws FormatError for a
// null or negative id inside a row, or when every row is null.
IdRows id_rows(const arrow::ChunkedArray& column, const std::string& path, const std::string& name);
// Every row as one JSON object of its columns (JSON text), nested lists and structs included,
// so that a reader of JSON records (the sft dataset) takes table rows as it takes JSONL lines.
// Throws FormatError naming the column for a type JSON cannot hold (binary, a map with
// non-string keys, ...).
std::vector<std::string> json_rows(const arrow::Table& table, const std::string& path);
// The first `limit` rows, each column's value as Arrow prints it.
std::vector<std::vector<std::string>> printed_rows(const arrow::Table& table, size_t limit);

}  // namespace loom::formats
