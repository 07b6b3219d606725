// tsv_files.cpp: the file list of a criteo_tsv dataset and its line reader (tsv_files.hpp).
#include "tsv_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "plugins/datasets/common/comma_list.hpp"
#include "criteo_line.hpp"
#include "plugins/datasets/common/data_error.hpp"

namespace loom::criteo {

namespace fs = std::filesystem;
using loom::data::bad_input;
using loom::data::io_error;

namespace {

constexpr size_t kFirstBufferBytes = size_t(1) << 16;  // grows while a line does not fit
constexpr size_t kBufferBytes = 2 * kMaxLineBytes;     // always room for a whole line after compaction

std::string relative_hint(const std::string& path) {
  if (!fs::path(path).is_relative()) return "";
  std::error_code ec;
  return " (relative paths start at the current directory, " + fs::current_path(ec).string() + ")";
}

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::vector<std::string> split_list(const std::string& option) {
  std::vector<std::string> out = loom::data::split_comma_list(option);
  for (const std::string& item : out)
    if (item.empty())
      throw bad_input("criteo_tsv: files \"" + option +
                      "\" has an empty entry; list TSV files separated by ',', or name one directory");
  return out;
}

std::vector<std::string> tsv_files_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool tsv = name.size() > 4 && name.compare(name.size() - 4, 4, ".tsv") == 0 && name[0] != '.';
    if (tsv && it->is_regular_file(ec)) names.push_back(name);
  }
  if (ec) throw io_error(dir + ": cannot list the directory: " + ec.message());
  if (names.empty())
    throw bad_input(dir + ": the directory holds no *.tsv file; point `files` at TSV files or a directory of them");
  std::sort(names.begin(), names.end());
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back((fs::path(dir) / n).string());
  return out;
}

}  // namespace

int open_regular_file(const std::string& path, uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw bad_input(path + ": no such file" + relative_hint(path) + "; check `files`");
    throw bad_input(path + ": cannot open for reading: " + std::generic_category().message(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw io_error(path + ": cannot stat: " + std::generic_category().message(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw bad_input(path + ": is " + file_type_name(st.st_mode) +
                    ", not a regular file; `files` takes TSV files, or one directory alone");
  }
  size = uint64_t(st.st_size);
  return fd;
}

std::vector<std::string> resolve_files(const std::string& option, uint64_t* total_bytes) {
  std::vector<std::string> files = split_list(option);
  std::error_code ec;
  if (files.size() == 1 && fs::is_directory(files[0], ec)) files = tsv_files_in(files[0]);
  uint64_t total = 0;
  for (const std::string& f : files) {
    uint64_t size = 0;
    ::close(open_regular_file(f, size));
    total += size;
  }
  if (total_bytes) *total_bytes = total;
  return files;
}

LineReader::LineReader(const std::string& path, uint64_t offset, uint64_t line_no)
    : path_(path), buffer_(kFirstBufferBytes), buffer_offset_(offset), line_no_(line_no) {
  uint64_t size = 0;
  fd_ = open_regular_file(path, size);
  if (offset > 0 && ::lseek(fd_, off_t(offset), SEEK_SET) != off_t(offset)) {
    const int err = errno;
    ::close(fd_);
    throw io_error(path + ": cannot seek to byte " + std::to_string(offset) + ": " +
                   std::generic_category().message(err));
  }
}

LineReader::~LineReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    buffer_offset_ += begin_;
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(std::min(2 * buffer_.size(), kBufferBytes));
  for (;;) {
    const ssize_t n = ::read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    if (n > 0) {
      end_ += size_t(n);
      return true;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    if (errno != EINTR)
      throw io_error(path_ + ": read error: " + std::generic_category().message(errno));
  }
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = 0;  // bytes after begin_ known to hold no '\n'
  for (;;) {
    const char* first = buffer_.data() + begin_;
    const void* nl = std::memchr(first + scanned, '\n', end_ - begin_ - scanned);
    if (nl != nullptr) {
      const size_t length = size_t(static_cast<const char*>(nl) - first);
      if (length > kMaxLineBytes) throw bad_input(overlong_line_message(path_, line_no_ + 1));
      line = std::string_view(first, length);
      begin_ += length + 1;
      ++line_no_;
      return true;
    }
    scanned = end_ - begin_;
    if (scanned > kMaxLineBytes) throw bad_input(overlong_line_message(path_, line_no_ + 1));
    if (!fill()) {
      if (begin_ == end_) return false;
      line = std::string_view(buffer_.data() + begin_, end_ - begin_);  // the last line has no '\n'
      begin_ = end_;
      ++line_no_;
      return true;
    }
  }
}

}  // namespace loom::criteo
