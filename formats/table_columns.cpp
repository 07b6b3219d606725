// table_columns.cpp: Arrow arrays to TextRows and IdRows (table_columns.hpp).
#include "formats/table_columns.hpp"

#include <cstdint>
#include <limits>

#include "formats/format_error.hpp"

namespace loom::formats {

namespace {

bool integer_type(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::INT8: case arrow::Type::INT16: case arrow::Type::INT32: case arrow::Type::INT64:
    case arrow::Type::UINT8: case arrow::Type::UINT16: case arrow::Type::UINT32: case arrow::Type::UINT64:
      return true;
    default:
      return false;
  }
}

struct Where {
  const std::string& path;
  const std::string& name;
  std::string at(uint64_t row) const { return path + ": column \"" + name + "\" row " + std::to_string(row); }
};

// Appends values [begin, end) of an integer array of type T as ids; `row` names the row.
template <class T>
void append_ids(const arrow::Array& values, int64_t begin, int64_t end, IdRows& out, const Where& where, uint64_t row) {
  const auto& ints = static_cast<const arrow::NumericArray<T>&>(values);
  using C = typename T::c_type;
  for (int64_t j = begin; j < end; ++j) {
    if (ints.IsNull(j)) invalid(where.at(row) + " holds a null token id; every id of a row must be set");
    const C v = ints.Value(j);
    if constexpr (std::is_signed_v<C>) {
      if (v < 0) invalid(where.at(row) + " holds token id " + std::to_string(v) + "; ids are at least 0");
    } else if constexpr (sizeof(C) == 8) {
      if (v > C(std::numeric_limits<int64_t>::max())) invalid(where.at(row) + " holds token id " + std::to_string(v) + ", too large");
    }
    out.values.push_back(int64_t(v));
  }
}

void append_range(const arrow::Array& values, int64_t begin, int64_t end, IdRows& out, const Where& where, uint64_t row) {
  switch (values.type_id()) {
    case arrow::Type::INT8: return append_ids<arrow::Int8Type>(values, begin, end, out, where, row);
    case arrow::Type::INT16: return append_ids<arrow::Int16Type>(values, begin, end, out, where, row);
    case arrow::Type::INT32: return append_ids<arrow::Int32Type>(values, begin, end, out, where, row);
    case arrow::Type::INT64: return append_ids<arrow::Int64Type>(values, begin, end, out, where, row);
    case arrow::Type::UINT8: return append_ids<arrow::UInt8Type>(values, begin, end, out, where, row);
    case arrow::Type::UINT16: return append_ids<arrow::UInt16Type>(values, begin, end, out, where, row);
    case arrow::Type::UINT32: return append_ids<arrow::UInt32Type>(values, begin, end, out, where, row);
    case arrow::Type::UINT64: return append_ids<arrow::UInt64Type>(values, begin, end, out, where, row);
    default: invalid(where.at(row) + ": its values are " + values.type()->ToString() + ", not integers");
  }
}

// Each list's [begin, end) within its values, for the three list layouts.
template <class ListArray>
void append_lists(const ListArray& lists, IdRows& out, const Where& where, uint64_t& row) {
  for (int64_t i = 0; i < lists.length(); ++i, ++row) {
    if (lists.IsNull(i)) {
      ++out.nulls;
      continue;
    }
    const int64_t begin = lists.value_offset(i);
    append_range(*lists.values(), begin, begin + lists.value_length(i), out, where, row);
    out.offsets.push_back(out.values.size());
  }
}

void refuse_all_null(uint64_t kept, uint64_t nulls, const Where& where) {
  if (kept == 0 && nulls > 0)
    invalid(where.path + ": column \"" + where.name + "\" holds only nulls (" + std::to_string(nulls) +
            " rows) in this part; name the column that holds the data");
}

}  // namespace

ColumnKind column_kind(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::STRING: case arrow::Type::LARGE_STRING: case arrow::Type::STRING_VIEW:
      return ColumnKind::text;
    case arrow::Type::LIST: case arrow::Type::LARGE_LIST: case arrow::Type::FIXED_SIZE_LIST:
      return integer_type(static_cast<const arrow::BaseListType&>(type).value_type()->id()) ? ColumnKind::token_ids : ColumnKind::other;
    default:
      return ColumnKind::other;
  }
}

TextRows text_rows(const arrow::ChunkedArray& column, const std::string& path, const std::string& name) {
  TextRows out;
  const auto take = [&](const auto& strings) {
    for (int64_t i = 0; i < strings.length(); ++i) {
      if (strings.IsNull(i)) {
        ++out.nulls;
      } else {
        out.rows.emplace_back(strings.GetView(i));
      }
    }
  };
  for (const auto& chunk : column.chunks()) {
    switch (chunk->type_id()) {
      case arrow::Type::STRING: take(static_cast<const arrow::StringArray&>(*chunk)); break;
      case arrow::Type::LARGE_STRING: take(static_cast<const arrow::LargeStringArray&>(*chunk)); break;
      case arrow::Type::STRING_VIEW: take(static_cast<const arrow::StringViewArray&>(*chunk)); break;
      default: invalid(path + ": column \"" + name + "\" holds " + chunk->type()->ToString() + ", not text");
    }
  }
  refuse_all_null(out.rows.size(), out.nulls, {path, name});
  return out;
}

IdRows id_rows(const arrow::ChunkedArray& column, const std::string& path, const std::string& name) {
  IdRows out;
  const Where where{path, name};
  uint64_t row = 0;
  for (const auto& chunk : column.chunks()) {
    switch (chunk->type_id()) {
      case arrow::Type::LIST: append_lists(static_cast<const arrow::ListArray&>(*chunk), out, where, row); break;
      case arrow::Type::LARGE_LIST: append_lists(static_cast<const arrow::LargeListArray&>(*chunk), out, where, row); break;
      case arrow::Type::FIXED_SIZE_LIST: append_lists(static_cast<const arrow::FixedSizeListArray&>(*chunk), out, where, row); break;
      default: invalid(path + ": column \"" + name + "\" holds " + chunk->type()->ToString() + ", not lists of token ids");
    }
  }
  refuse_all_null(out.size(), out.nulls, where);
  return out;
}

std::vector<std::vector<std::string>> printed_rows(const arrow::Table& table, size_t limit) {
  std::vector<std::vector<std::string>> out;
  for (int64_t r = 0; r < table.num_rows() && out.size() < limit; ++r) {
    std::vector<std::string> row;
    for (const auto& column : table.columns()) {
      auto scalar = column->GetScalar(r);
      row.push_back(scalar.ok() ? (*scalar)->ToString() : "(" + scalar.status().ToString() + ")");
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace loom::formats
