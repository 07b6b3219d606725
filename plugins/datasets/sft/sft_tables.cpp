// sft_tables.cpp: see sft_tables.hpp.
#include "sft_tables.hpp"

#include <stdexcept>

#ifdef LOOM_WITH_ARROW
#include "formats/format_error.hpp"
#include "formats/table_file.hpp"
#include "formats/table_paths.hpp"
#endif

namespace loom::sft {

bool is_table_file(const std::string& path) {
  const auto ends = [&](const std::string& tail) {
    return path.size() >= tail.size() && path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".parquet") || ends(".arrow");
}

#ifdef LOOM_WITH_ARROW

namespace {

template <class Fn>
auto as_invalid_argument(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const formats::FormatError& e) {
    if (e.kind() == formats::FormatError::Kind::io) throw std::runtime_error(e.what());
    throw std::invalid_argument(e.what());
  }
}

}  // namespace

std::vector<std::string> saved_dataset_files(const std::string& folder) {
  return as_invalid_argument([&] { return formats::resolve_table_paths(folder); });
}

void for_each_table_row(const std::string& file, const std::function<void(std::string json, std::string where)>& row) {
  as_invalid_argument([&] {
    const formats::TableFile table = formats::TableFile::open(file);
    uint64_t n = 0;
    for (size_t part = 0; part < table.info().part_rows.size(); ++part) {
      for (std::string& json : table.read_json(part)) row(std::move(json), file + " row " + std::to_string(++n));
      table.release_pages();
    }
  });
}

#else

namespace {
[[noreturn]] void no_arrow(const std::string& what) {
  throw std::invalid_argument(what + ": Parquet and Arrow files need a build with Apache Arrow (this one found no pyarrow: "
                              "cmake/LoomArrow.cmake); convert the data to JSONL or build with tools/dev");
}
}  // namespace

std::vector<std::string> saved_dataset_files(const std::string& folder) { no_arrow(folder); }
void for_each_table_row(const std::string& file, const std::function<void(std::string, std::string)>&) { no_arrow(file); }

#endif

}  // namespace loom::sft
