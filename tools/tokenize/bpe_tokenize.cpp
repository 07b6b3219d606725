// bpe_tokenize.cpp: see bpe_tokenize.hpp.
#include "bpe_tokenize.hpp"

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "plugins/datasets/common/data_error.hpp"
#include "plugins/datasets/common/text_files.hpp"

namespace loom::data {

namespace {

// A batch is encoded in parallel, then written; its size bounds the memory in flight.
constexpr size_t kBatchBytes = 32u << 20;
constexpr size_t kBatchDocuments = 4096;

bool is_jsonl(const std::filesystem::path& file) { return file.extension() == ".jsonl"; }

class ProgressLine {
 public:
  explicit ProgressLine(uint64_t total_bytes) : total_(total_bytes), live_(::isatty(STDERR_FILENO) == 1) {}
  void update(uint64_t bytes, uint64_t tokens, bool done) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double percent = total_ ? 100.0 * double(bytes) / double(total_) : 100.0;
    if (!done && (live_ ? seconds - last_print_ < 0.25 : percent < next_percent_)) return;
    last_print_ = seconds;
    while (next_percent_ <= percent) next_percent_ += 10;
    std::fprintf(stderr, "%stokenizing: %.1f/%.1f MB (%3.0f%%), %.1f MB/s, %llu tokens%s", live_ ? "\r" : "",
                 double(bytes) / 1e6, double(total_) / 1e6, percent, seconds > 0 ? double(bytes) / 1e6 / seconds : 0.0,
                 static_cast<unsigned long long>(tokens), live_ && !done ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  uint64_t total_;
  bool live_;
  double last_print_ = -1, next_percent_ = 10;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Reads documents one at a time, in input order.
class DocumentReader {
 public:
  DocumentReader(const std::vector<std::filesystem::path>& files, std::string field)
      : files_(files), field_(std::move(field)) {}

  bool next(std::string& document) {
    while (true) {
      if (lines_.is_open()) {
        std::string line;
        while (std::getline(lines_, line)) {
          ++line_number_;
          if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
          document = field_of(line);
          return true;
        }
        if (lines_.bad()) throw io_error(files_[index_ - 1].string() + ": read error");
        lines_.close();
      }
      if (index_ >= files_.size()) return false;
      const auto& file = files_[index_++];
      if (is_jsonl(file)) {
        lines_.open(file);
        if (!lines_) throw bad_input(file.string() + ": cannot open");
        line_number_ = 0;
        continue;
      }
      document.clear();
      append_file_bytes(file, document);
      return true;
    }
  }

 private:
  std::string field_of(const std::string& line) const {
    const std::string where = files_[index_ - 1].string() + " line " + std::to_string(line_number_);
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error&) {
      throw bad_input(where + ": not valid JSON; each line of a .jsonl file must be one JSON object");
    }
    if (!value.is_object() || !value.contains(field_) || !value[field_].is_string())
      throw bad_input(where + ": has no string field \"" + field_ + "\"; name the text field with --field");
    return value[field_].get<std::string>();
  }

  const std::vector<std::filesystem::path>& files_;
  std::string field_;
  size_t index_ = 0;
  std::ifstream lines_;
  uint64_t line_number_ = 0;
};

void encode_batch(const std::vector<std::string>& documents, std::vector<std::vector<int32_t>>& ids,
                  const tok::Tokenizer& tokenizer, unsigned threads, const std::optional<int32_t>& eos) {
  ids.assign(documents.size(), {});
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = next++; i < documents.size() && !failed; i = next++) {
      try {
        ids[i] = tokenizer.encode(documents[i]);
        if (eos) ids[i].push_back(*eos);
      } catch (...) {
        if (!failed.exchange(true)) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

BpeTokenizeStats bpe_tokenize(const std::vector<std::filesystem::path>& files, const tok::Tokenizer& tokenizer,
                              const BpeTokenizeOptions& options,
                              const std::function<void(const std::vector<int32_t>&)>& write) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t total = 0;
  for (const auto& file : files) total += std::filesystem::file_size(file);
  ProgressLine progress(total);
  DocumentReader reader(files, options.jsonl_field);
  const std::optional<int32_t> eos = options.append_eos ? tokenizer.info().eos_id : std::nullopt;
  BpeTokenizeStats stats;
  std::vector<std::string> batch;
  std::vector<std::vector<int32_t>> ids;
  std::string document;
  uint64_t batch_file_bytes = 0;
  bool more = true;
  while (more) {
    batch.clear();
    size_t batch_bytes = 0;
    while (batch.size() < kBatchDocuments && batch_bytes < kBatchBytes && (more = reader.next(document))) {
      batch_bytes += document.size();
      batch.push_back(std::move(document));
    }
    encode_batch(batch, ids, tokenizer, options.threads, eos);
    for (size_t i = 0; i < batch.size(); ++i) {
      write(ids[i]);
      stats.tokens += ids[i].size();
    }
    stats.documents += batch.size();
    stats.bytes += batch_bytes;
    batch_file_bytes = std::min(total, batch_file_bytes + batch_bytes);
    progress.update(more ? batch_file_bytes : total, stats.tokens, !more);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace loom::data
