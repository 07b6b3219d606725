// part_tokens.cpp: PartTokens (part_tokens.hpp).
#include "plugins/datasets/parquet/part_tokens.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "formats/table_file.hpp"

namespace loom::parquet_data {

namespace {

// Rows [begin, end) of `rows` into out: each document's ids, then the separator.
void tokenize_rows(const std::vector<std::string>& rows, size_t begin, size_t end, const PartTokens& p, std::vector<int32_t>& out) {
  for (size_t i = begin; i < end; ++i) {
    const std::vector<int32_t> ids = p.tokenizer->encode(rows[i], p.add_special_tokens);
    out.insert(out.end(), ids.begin(), ids.end());
    if (p.separator) out.push_back(*p.separator);
  }
}

// Every row of a text column, split over threads, joined back in row order.
std::vector<int32_t> tokenize_all(const std::vector<std::string>& rows, const PartTokens& p) {
  const size_t n = rows.size(), threads = std::max<size_t>(1, std::min<size_t>(p.threads, n / 16 + 1));
  std::vector<std::vector<int32_t>> pieces(threads);
  std::vector<std::thread> workers;
  std::exception_ptr failed;
  std::mutex failed_mutex;
  for (size_t t = 1; t < threads; ++t)
    workers.emplace_back([&, t] {
      try {
        tokenize_rows(rows, n * t / threads, n * (t + 1) / threads, p, pieces[t]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failed_mutex);
        failed = std::current_exception();
      }
    });
  try {
    tokenize_rows(rows, 0, n / threads, p, pieces[0]);  // this thread takes the first share
  } catch (...) {
    std::lock_guard<std::mutex> lock(failed_mutex);
    failed = std::current_exception();
  }
  for (auto& w : workers) w.join();
  if (failed) std::rethrow_exception(failed);
  std::vector<int32_t> out = std::move(pieces[0]);
  for (size_t t = 1; t < threads; ++t) out.insert(out.end(), pieces[t].begin(), pieces[t].end());
  return out;
}

}  // namespace

std::vector<int32_t> PartTokens::read(const std::string& file, size_t part) const {
  return as_data_error([&] {
    const formats::TableFile table = formats::TableFile::open(file);
    std::vector<int32_t> out;
    if (text) {
      out = tokenize_all(table.read_text(part, column).rows, *this);
    } else {
      const formats::IdRows rows = table.read_ids(part, column);
      out.reserve(rows.values.size());
      for (const int64_t id : rows.values) {
        if (id > INT32_MAX) throw data::bad_input(file + ": column \"" + column + "\" holds token id " + std::to_string(id) + ", above 2^31 - 1");
        out.push_back(int32_t(id));
      }
    }
    if (vocab_size > 0)
      for (const int32_t id : out)
        if (uint64_t(id) >= vocab_size)
          throw data::bad_input(file + ": part " + std::to_string(part) + " gives token id " + std::to_string(id) + ", not below vocab_size " +
                                std::to_string(vocab_size) + "; the model's vocabulary must hold the tokenizer's");
    table.release_pages();
    return out;
  });
}

}  // namespace loom::parquet_data
