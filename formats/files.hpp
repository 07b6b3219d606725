// files.hpp: POSIX file access for readers of files other people wrote. Every open refuses
// what is not a regular file without blocking on it (a FIFO or a device opens non-blocking and
// is then refused), every size is checked before it is trusted, and every failure is a
// FormatError naming the path.
//   MappedFile      a whole file mapped read-only; release() hands pages back once copied
//   read_text_file  a small file (JSON) read into a string, with a size cap
//   OutputFile      a new file written front to back, then fsync'd
//   plain_name      a name that stays inside its folder (no '/', not "." or "..")
#pragma once

#include <cstdint>
#include <string>

namespace loom::formats {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }  // NULL for an empty file
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the kernel the bytes [begin, end) are no longer needed: their pages leave this
  // process's resident set (they stay in the page cache), so reading a model tensor by tensor
  // keeps at most one tensor's source pages resident. Best effort; the data stay readable.
  void release(uint64_t begin, uint64_t end) const;

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
};

// The whole file as text; a file over max_bytes is refused, not read.
std::string read_text_file(const std::string& path, uint64_t max_bytes);

// True when the path names an existing regular file (following symbolic links, as the Hugging
// Face cache's snapshot folders need).
bool is_regular_file(const std::string& path);
// True when something (of any type) is at path; readers then refuse what is not a regular file.
bool path_exists(const std::string& path);

// A file name that cannot leave its folder: not empty, no '/', no NUL, not "." or "..".
bool plain_name(const std::string& name);

std::string join(const std::string& dir, const std::string& name);

class OutputFile {
 public:
  explicit OutputFile(std::string path);  // created or truncated
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, uint64_t size);  // survives short writes and EINTR
  void commit();                                // fsync and close; durable afterwards
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace loom::formats
