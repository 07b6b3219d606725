// table_file.cpp: TableFile over Arrow's readers. The bytes come from a MappedFile (or a
// string, for fuzzing) wrapped as a non-owning arrow::Buffer, so Arrow reads them in place.
#include "formats/table_file.hpp"

#include <arrow/api.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>

#include <cstring>
#include <optional>

#include "formats/files.hpp"
#include "formats/format_error.hpp"
#include "formats/table_columns.hpp"

namespace loom::formats {

namespace {

constexpr char kParquetMagic[4] = {'P', 'A', 'R', '1'};
constexpr char kArrowFileMagic[6] = {'A', 'R', 'R', 'O', 'W', '1'};
// The most rows one part may hold: pyarrow writes row groups of at most 1 Mi rows by default, and
// datasets record batches of 1000.
constexpr uint64_t kMaxPartRows = uint64_t(1) << 22;

TableFormat detect_format(const unsigned char* data, uint64_t size) {
  if (size >= 8 && std::memcmp(data, kParquetMagic, 4) == 0 && std::memcmp(data + size - 4, kParquetMagic, 4) == 0)
    return TableFormat::parquet;
  if (size >= 6 && std::memcmp(data, kArrowFileMagic, 6) == 0) return TableFormat::arrow_file;
  return TableFormat::arrow_stream;
}

std::string what_failed(const std::string& path, const std::string& doing, const std::string& why) {
  return path + ": " + doing + " failed: " + why;
}

}  // namespace

const char* table_format_name(TableFormat format) {
  switch (format) {
    case TableFormat::parquet: return "Parquet";
    case TableFormat::arrow_file: return "Arrow IPC file";
    case TableFormat::arrow_stream: return "Arrow IPC stream";
  }
  return "?";
}

struct TableFile::Impl {
  std::optional<MappedFile> mapped;  // the file's bytes, or
  std::string owned;                 // bytes given in memory
  std::shared_ptr<arrow::Buffer> buffer;
  std::shared_ptr<arrow::io::BufferReader> input;
  std::unique_ptr<parquet::arrow::FileReader> parquet;       // TableFormat::parquet
  std::shared_ptr<arrow::ipc::RecordBatchFileReader> ipc;    // TableFormat::arrow_file
  std::shared_ptr<arrow::Schema> schema;
  TableInfo info;

  // Every Arrow call goes through here: a failed Status, a Parquet exception or an allocation
  // too large becomes one FormatError naming the file and what was being done.
  template <class Fn>
  auto guarded(const std::string& doing, Fn&& fn) const -> decltype(fn()) {
    try {
      return fn();
    } catch (const FormatError&) {
      throw;
    } catch (const parquet::ParquetException& e) {
      invalid(what_failed(info.path, doing, e.what()) + "; the file is not valid Parquet (truncated or damaged?)");
    } catch (const std::bad_alloc&) {
      invalid(what_failed(info.path, doing, "its sizes ask for more memory than there is") +
              "; the file is damaged or not a table");
    } catch (const std::exception& e) {
      invalid(what_failed(info.path, doing, e.what()));
    }
  }
  void check(const arrow::Status& status, const std::string& doing) const {
    if (!status.ok())
      invalid(what_failed(info.path, doing, status.ToString()) + "; the file is damaged, or is not " +
              table_format_name(info.format));
  }
  template <class T>
  T value(arrow::Result<T> result, const std::string& doing) const {
    check(result.status(), doing);
    return std::move(result).ValueUnsafe();
  }

  void open() {
    input = std::make_shared<arrow::io::BufferReader>(buffer);
    info.format = detect_format(buffer->data(), uint64_t(buffer->size()));
    if (info.format == TableFormat::arrow_stream && buffer->size() >= 4 && std::memcmp(buffer->data(), kParquetMagic, 4) == 0)
      invalid(info.path + ": starts as Parquet but does not end with its footer (\"PAR1\"): the file is truncated (a copy or "
              "download cut short?); fetch it again");
    guarded("opening", [&] {
      switch (info.format) {
        case TableFormat::parquet: open_parquet(); break;
        case TableFormat::arrow_file: open_arrow_file(); break;
        case TableFormat::arrow_stream: open_arrow_stream(); break;
      }
    });
    for (const auto& field : schema->fields()) info.columns.push_back({field->name(), field->type()->ToString(), column_kind(*field->type())});
    if (info.columns.empty()) invalid(info.path + ": the table has no columns; point the path at the data's files");
    // Rows of null or empty values cost a file nearly nothing, so a row count is bounded here, not
    // by the file's size: a part is read whole, and a hostile count must not ask for all memory.
    for (size_t p = 0; p < info.part_rows.size(); ++p) {
      if (info.part_rows[p] > kMaxPartRows)
        invalid(info.path + ": part " + std::to_string(p) + " (a row group or record batch) holds " + std::to_string(info.part_rows[p]) +
                " rows, more than the " + std::to_string(kMaxPartRows) + " read at once; write the file with smaller row groups");
      info.rows += info.part_rows[p];
    }
  }

  void open_parquet() {
    parquet = value(parquet::arrow::OpenFile(input, arrow::default_memory_pool()), "reading the Parquet footer");
    parquet->set_use_threads(false);  // the dataset runs its own helper threads
    check(parquet->GetSchema(&schema), "reading the Parquet schema");
    const auto metadata = parquet->parquet_reader()->metadata();
    for (int g = 0; g < metadata->num_row_groups(); ++g) {
      const int64_t rows = metadata->RowGroup(g)->num_rows();
      if (rows < 0) invalid(info.path + ": row group " + std::to_string(g) + " says it has " + std::to_string(rows) + " rows");
      info.part_rows.push_back(uint64_t(rows));
    }
  }

  void open_arrow_file() {
    ipc = value(arrow::ipc::RecordBatchFileReader::Open(input, ipc_options()), "reading the Arrow file footer");
    schema = ipc->schema();
    for (int b = 0; b < ipc->num_record_batches(); ++b) info.part_rows.push_back(uint64_t(read_file_batch(b)->num_rows()));
  }

  // A stream has no footer: its batches are walked once to count their rows (in place, so
  // only their metadata is touched when they are not compressed).
  void open_arrow_stream() {
    auto reader = open_stream();
    schema = reader->schema();
    for (;;) {
      std::shared_ptr<arrow::RecordBatch> batch = value(reader->Next(), "reading record batch " + std::to_string(info.part_rows.size()));
      if (!batch) break;
      check(batch->Validate(), "checking record batch " + std::to_string(info.part_rows.size()));
      info.part_rows.push_back(uint64_t(batch->num_rows()));
    }
  }

  std::shared_ptr<arrow::ipc::RecordBatchStreamReader> open_stream() const {
    auto stream = std::make_shared<arrow::io::BufferReader>(buffer);
    return value(arrow::ipc::RecordBatchStreamReader::Open(stream, ipc_options()), "reading the Arrow stream's schema");
  }

  // A file's buffers are read in place, and a hostile one may place them at any offset: each is
  // copied to its type's alignment when it is not there already (no copy for a sound file).
  static arrow::ipc::IpcReadOptions ipc_options() {
    auto options = arrow::ipc::IpcReadOptions::Defaults();
    options.ensure_alignment = arrow::ipc::Alignment::kDataTypeSpecificAlignment;
    return options;
  }

  std::shared_ptr<arrow::RecordBatch> read_file_batch(int b) const {
    auto batch = value(ipc->ReadRecordBatch(b), "reading record batch " + std::to_string(b));
    check(batch->Validate(), "checking record batch " + std::to_string(b));
    return batch;
  }

  // Part `part`'s column `index`, refused (with `not_it`) unless it holds `kind`.
  std::shared_ptr<arrow::Table> read_column(size_t part, size_t index, ColumnKind kind, const std::string& not_it) const {
    const TableColumn& c = info.columns[index];
    if (c.kind != kind) invalid(info.path + ": column \"" + c.name + "\" holds " + c.type + ", " + not_it);
    return read_part(part, int(index));
  }

  // Part `part`'s column `index` (every column when index < 0), validated in full.
  std::shared_ptr<arrow::Table> read_part(size_t part, int index) const {
    if (part >= info.part_rows.size())
      invalid(info.path + ": part " + std::to_string(part) + " asked for, the file has " + std::to_string(info.part_rows.size()));
    const std::string doing = std::string(info.format == TableFormat::parquet ? "reading row group " : "reading record batch ") +
                              std::to_string(part);
    return guarded(doing, [&] {
      std::shared_ptr<arrow::Table> table;
      if (info.format == TableFormat::parquet) {
        table = index < 0 ? value(parquet->ReadRowGroup(int(part)), doing) : value(parquet->ReadRowGroup(int(part), {index}), doing);
      } else {
        std::shared_ptr<arrow::RecordBatch> batch;
        if (info.format == TableFormat::arrow_file) {
          batch = read_file_batch(int(part));
        } else {
          auto reader = open_stream();
          for (size_t b = 0; b <= part; ++b) batch = value(reader->Next(), doing);
          if (!batch) invalid(info.path + ": the stream ended before record batch " + std::to_string(part) + "; it changed since it was opened");
        }
        if (index >= 0) batch = value(batch->SelectColumns({index}), doing);
        table = value(arrow::Table::FromRecordBatches({batch}), doing);
      }
      check(table->ValidateFull(), doing);
      if (uint64_t(table->num_rows()) != info.part_rows[part])
        invalid(info.path + ": " + doing + " gave " + std::to_string(table->num_rows()) + " rows where its metadata says " +
                std::to_string(info.part_rows[part]) + "; the file is damaged");
      return table;
    });
  }
};

TableFile::TableFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TableFile::TableFile(TableFile&&) noexcept = default;
TableFile& TableFile::operator=(TableFile&&) noexcept = default;
TableFile::~TableFile() = default;

TableFile TableFile::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->info.path = path;
  impl->mapped.emplace(path);
  static const unsigned char kEmpty[1] = {0};
  const unsigned char* data = impl->mapped->data() ? impl->mapped->data() : kEmpty;
  impl->info.bytes = impl->mapped->size();
  impl->buffer = std::make_shared<arrow::Buffer>(data, int64_t(impl->mapped->size()));
  impl->open();
  return TableFile(std::move(impl));
}

TableFile TableFile::from_bytes(const std::string& name, std::string bytes) {
  auto impl = std::make_unique<Impl>();
  impl->info.path = name;
  impl->owned = std::move(bytes);
  impl->info.bytes = impl->owned.size();
  impl->buffer = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>(impl->owned.data()), int64_t(impl->owned.size()));
  impl->open();
  return TableFile(std::move(impl));
}

const TableInfo& TableFile::info() const { return impl_->info; }

size_t TableFile::column(const std::string& name) const {
  const auto& columns = impl_->info.columns;
  std::string names;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].name == name) return i;
    names += (names.empty() ? "" : ", ") + columns[i].name;
  }
  invalid(impl_->info.path + ": no column \"" + name + "\" (its columns: " + (names.empty() ? "none" : names) +
          "); name one of them in [data] column");
}

TextRows TableFile::read_text(size_t part, const std::string& name) const {
  const auto table = impl_->read_column(part, column(name), ColumnKind::text,
                                        "not text (string); name a text column, or give token ids as a list of integers");
  return impl_->guarded("reading column \"" + name + "\"", [&] { return text_rows(*table->column(0), impl_->info.path, name); });
}

IdRows TableFile::read_ids(size_t part, const std::string& name) const {
  const auto table = impl_->read_column(part, column(name), ColumnKind::token_ids,
                                        "not token ids (a list of integers); name such a column, or a text column to tokenize");
  return impl_->guarded("reading column \"" + name + "\"", [&] { return id_rows(*table->column(0), impl_->info.path, name); });
}

std::vector<std::string> TableFile::read_json(size_t part) const {
  const auto table = impl_->read_part(part, -1);
  return impl_->guarded("reading rows as JSON", [&] { return json_rows(*table, impl_->info.path); });
}

std::vector<std::vector<std::string>> TableFile::preview(size_t part, size_t limit) const {
  const auto table = impl_->read_part(part, -1);
  return impl_->guarded("printing rows", [&] { return printed_rows(*table, limit); });
}

void TableFile::release_pages() const {
  if (impl_->mapped) impl_->mapped->release(0, impl_->mapped->size());
}

}  // namespace loom::formats
