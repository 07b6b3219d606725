// files.hpp: POSIX file access for readers of files other people wrote. Every open refuses
// what is not a regular file without blocking on it (a FIFO or a device opens non-blocking and
// is then refused), every size is checked before it is trusted, and every failure is a
// FormatError naming the path.
//   MappedFile      a whole file mapped read-only; release() hands pages back once copied
//                   (the one memory map: token_file and the checkpoint backends use it too)
//   read_text_file  a small file (JSON) read into a string, with a size cap
//   OutputFile      a new file written front to back, then fsync'd
//   plain_name      a name that stays inside its folder (no '/', not "." or "..")
#pragma once

#include <cstdint>
#include <string>

namespace loom::formats {

class MappedFile {
 public:
  // Opens path (without blocking: a regular file only) and maps it.
  explicit MappedFile(const std::string& path);
  // Maps fd, a regular file the caller opened by rules of its own (the checkpoint backends
  // refuse symbolic links, token_file words its refusals for its users); closes fd, also when
  // mapping fails (a FormatError of kind io).
  MappedFile(int fd, std::string path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }  // NULL for an empty file
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Access-pattern hint for the whole file (MADV_RANDOM, MADV_SEQUENTIAL); best effort.
  void advise(int advice) const;
  // Tells the kernel the bytes [begin, end) are no longer needed: their pages leave this
  // process's resident set (they stay in the page cache; touching them again is a minor fault),
  // so reading a file piece by piece keeps little of it resident. The range is widened to
  // release_granule() boundaries: a fault maps more than the page it hits (the kernel's
  // fault-around, 64 KiB by default, and since Linux 6.x whole large page-cache folios, up to
  // a PMD), and those pages must go too. Measured on a 1 GiB token file with Linux 6.18:
  // 64 KiB granules left 350 MB resident, PMD-sized granules 3 MB. Best effort.
  void release(uint64_t begin, uint64_t end) const;
  // The span one page-table page maps (PMD size): 2 MiB with 4 KiB pages.
  static uint64_t release_granule();

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
