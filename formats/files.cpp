#include "files.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "format_error.hpp"

namespace loom::formats {
namespace {

[[noreturn]] void io_fail(const std::string& what, const std::string& path, int err) {
  throw FormatError(err == ENOENT ? FormatError::Kind::not_found : FormatError::Kind::io,
                    "cannot " + what + " '" + path + "': " + std::strerror(err));
}

// Opens for reading without blocking (a FIFO would wait for a writer forever) and refuses
// anything but a regular file. Returns the descriptor and its size.
int open_regular(const std::string& path, uint64_t* size) {
  int fd;
  do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) io_fail("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    io_fail("stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    invalid("'" + path + "' is not a regular file (a folder, FIFO, socket or device); pass the file itself");
  }
  *size = uint64_t(st.st_size);
  return fd;
}

int open_regular_descriptor(const std::string& path) {
  uint64_t size = 0;  // the mapping reads it again
  return open_regular(path, &size);
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : MappedFile(open_regular_descriptor(path), path) {}

MappedFile::MappedFile(int fd, std::string path) : path_(std::move(path)) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    io_fail("stat", path_, err);
  }
  size_ = uint64_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw FormatError(FormatError::Kind::io, "cannot memory-map " + std::to_string(size_) + " bytes of '" + path_ +
                                                   "': " + std::strerror(err));
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

void MappedFile::advise(int advice) const {
  if (data_ != nullptr) ::madvise(const_cast<unsigned char*>(data_), size_, advice);
}

void MappedFile::release(uint64_t begin, uint64_t end) const {
  if (data_ == nullptr || begin >= end) return;
  const uintptr_t granule = release_granule();
  const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t limit = base + size_;
  uintptr_t first = (base + begin) & ~(granule - 1);
  uintptr_t last = (base + std::min(end, size_) + granule - 1) & ~(granule - 1);
  if (first < base) first = base;  // base is page-aligned, so first stays page-aligned
  if (last > limit) last = limit;  // madvise rounds a partial last page up itself
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

uint64_t MappedFile::release_granule() {
  static const uint64_t granule = [] {
    const long page = ::sysconf(_SC_PAGESIZE);
    const uint64_t p = page > 0 ? uint64_t(page) : 4096;
    return p * (p / 8);  // pages per page-table page = page size / 8-byte entries
  }();
  return granule;
}

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  uint64_t size = 0;
  const int fd = open_regular(path, &size);
  if (size > max_bytes) {
    ::close(fd);
    invalid("'" + path + "' is " + std::to_string(size) + " bytes, over the " + std::to_string(max_bytes) +
            "-byte limit for this file; is it the right file?");
  }
  std::string out(size_t(size), '\0');
  size_t used = 0;
  while (used < out.size()) {
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      io_fail("read", path, err);
    }
    if (n == 0) break;  // shrank while we read: keep what is there
    used += size_t(n);
  }
  ::close(fd);
  out.resize(used);
  return out;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  do fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) io_fail("create", path_, errno);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, uint64_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux moves at most about 2 GiB per call; a short count simply loops.
    const ssize_t n = ::write(fd_, p, size_t(std::min<uint64_t>(size, uint64_t(1) << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_fail("write", path_, errno);
    if (n == 0) io_fail("write", path_, EIO);  // no progress: treat as an I/O error
    p += n;
    size -= uint64_t(n);
  }
}

void OutputFile::commit() {
  int rc;
  do rc = ::fsync(fd_);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) io_fail("fsync", path_, errno);
  const int fd = fd_;
  fd_ = -1;
  // close() after fsync can still report a deferred write error (NFS); EINTR must not be retried.
  if (::close(fd) != 0 && errno != EINTR) io_fail("close", path_, errno);
}

}  // namespace loom::formats
