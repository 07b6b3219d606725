// table_columns.cpp: Arrow arrays to TextRows and IdRows (table_columns.hpp).
#include "formats/table_columns.hpp"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

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

// Value i of `array` as JSON; `where` names the column for messages.
nlohmann::json json_value(const arrow::Array& array, int64_t i, const std::string& where) {
  if (array.IsNull(i)) return nullptr;
  switch (array.type_id()) {
    case arrow::Type::BOOL: return static_cast<const arrow::BooleanArray&>(array).Value(i);
    case arrow::Type::INT8: return static_cast<const arrow::Int8Array&>(array).Value(i);
    case arrow::Type::INT16: return static_cast<const arrow::Int16Array&>(array).Value(i);
    case arrow::Type::INT32: return static_cast<const arrow::Int32Array&>(array).Value(i);
    case arrow::Type::INT64: return static_cast<const arrow::Int64Array&>(array).Value(i);
    case arrow::Type::UINT8: return static_cast<const arrow::UInt8Array&>(array).Value(i);
    case arrow::Type::UINT16: return static_cast<const arrow::UInt16Array&>(array).Value(i);
    case arrow::Type::UINT32: return static_cast<const arrow::UInt32Array&>(array).Value(i);
    case arrow::Type::UINT64: return static_cast<const arrow::UInt64Array&>(array).Value(i);
    case arrow::Type::FLOAT: return static_cast<const arrow::FloatArray&>(array).Value(i);
    case arrow::Type::DOUBLE: return static_cast<const arrow::DoubleArray&>(array).Value(i);
    case arrow::Type::STRING: return std::string(static_cast<const arrow::StringArray&>(array).GetView(i));
    case arrow::Type::LARGE_STRING: return std::string(static_cast<const arrow::LargeStringArray&>(array).GetView(i));
    case arrow::Type::STRING_VIEW: return std::string(static_cast<const arrow::StringViewArray&>(array).GetView(i));
    case arrow::Type::DICTIONARY: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(array);
      return json_value(*d.dictionary(), d.GetValueIndex(i), where);
    }
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(array);
      nlohmann::json out = nlohmann::json::object();
      for (int f = 0; f < s.num_fields(); ++f) out[s.struct_type()->field(f)->name()] = json_value(*s.field(f), i, where);
      return out;
    }
    case arrow::Type::LIST: case arrow::Type::LARGE_LIST: case arrow::Type::FIXED_SIZE_LIST: {
      nlohmann::json out = nlohmann::json::array();
      const auto take = [&](const auto& lists) {
        const int64_t begin = lists.value_offset(i);
        for (int64_t j = begin; j < begin + lists.value_length(i); ++j) out.push_back(json_value(*lists.values(), j, where));
      };
      if (array.type_id() == arrow::Type::LIST) take(static_cast<const arrow::ListArray&>(array));
      else if (array.type_id() == arrow::Type::LARGE_LIST) take(static_cast<const arrow::LargeListArray&>(array));
      else take(static_cast<const arrow::FixedSizeListArray&>(array));
      return out;
    }
    default:
      invalid(where + " holds " + array.type()->ToString() + ", which has no JSON form here; drop the column or convert it");
  }
}

}  // namespace

std::vector<std::string> json_rows(const arrow::Table& table, const std::string& path) {
  std::vector<std::string> out(size_t(table.num_rows()), "{");
  for (int c = 0; c < table.num_columns(); ++c) {
    const std::string name = table.schema()->field(c)->name();
    const std::string key = nlohmann::json(name).dump() + ":", where = path + ": column \"" + name + "\"";
    int64_t row = 0;
    for (const auto& chunk : table.column(c)->chunks())
      for (int64_t i = 0; i < chunk->length(); ++i, ++row) {
        std::string& text = out[size_t(row)];
        text += (c == 0 ? "" : ",") + key + json_value(*chunk, i, where).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
  }
  for (auto& text : out) text += "}";
  return out;
}

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
