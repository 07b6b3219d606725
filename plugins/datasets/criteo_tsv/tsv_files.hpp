// tsv_files.hpp: which files a criteo_tsv dataset reads, and reading them line by line.
// Files come from other people: each is opened without blocking (a FIFO or device named by
// mistake must not hang the run) and refused unless it is a regular file, and no line may
// exceed criteo_line.hpp's kMaxLineBytes. Torch-free, SDK-free; errors are DataErrors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::criteo {

// The `files` option: a comma-separated list of files, read in order, or one directory, whose
// regular *.tsv files (not hidden) are read in byte order of their names. Each file is opened
// once here, so a bad one fails at create; total_bytes gets their summed size. Throws a
// bad_input DataError naming the entry.
std::vector<std::string> resolve_files(const std::string& option, uint64_t* total_bytes = nullptr);

// Opens path read-only with O_NONBLOCK and returns the descriptor; size gets its length.
// Throws a bad_input DataError when it cannot be opened or is not a regular file.
int open_regular_file(const std::string& path, uint64_t& size);

// Lines of one file from a byte offset on. Move-only; closes its file.
class LineReader {
 public:
  // Opens path and starts at byte `offset`, which must begin line line_no + 1.
  LineReader(const std::string& path, uint64_t offset, uint64_t line_no);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its '\n', valid until the next call; false at the end of the file.
  // Throws a bad_input DataError for a line over kMaxLineBytes, an io DataError on read failure.
  bool next(std::string_view& line);
  uint64_t offset() const { return buffer_offset_ + begin_; }  // where the next line starts
  uint64_t line_no() const { return line_no_; }                 // of the line last returned

 private:
  bool fill();  // reads more after the unread bytes; false at the end of the file

  std::string path_;
  int fd_ = -1;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;     // unread bytes are buffer_[begin_, end_)
  uint64_t buffer_offset_ = 0;     // file offset of buffer_[0]
  uint64_t line_no_ = 0;
  bool eof_ = false;
};

}  // namespace loom::criteo
