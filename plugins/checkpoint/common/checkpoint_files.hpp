// checkpoint_files.hpp: the file handling both checkpoint backends share, in plain POSIX I/O so
// that every failure is an errno turned into one clear message naming the path:
//   OutputFile  write loop that survives short writes and EINTR, then fsync + close
//   MappedInput a whole file mapped read-only (formats' MappedFile; loads copy out of it),
//               opened by open_for_reading's rules: no symbolic links, no FIFOs or devices
//   read_whole_file, file_name_option, join_path
// Every error is a loom::Error "<backend>: cannot <what> '<path>': <strerror>".
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <loom/plugin.hpp>

#include "formats/files.hpp"
#include "formats/format_error.hpp"

namespace loom::ckpt {

[[noreturn]] inline void io_fail(const std::string& backend, const std::string& what, const std::string& path,
                                 int err, loom_status_code code = LOOM_STATUS_CODE_INTERNAL) {
  throw Error(backend + ": cannot " + what + " '" + path + "': " + std::strerror(err), code);
}

inline std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// A file-name option: one plain name inside the checkpoint directory, because the manager
// indexes, checksums and renames that directory as a whole.
inline std::string file_name_option(const Config& config, const char* key, const std::string& backend) {
  const std::string name = config.str(key);
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    throw Error(backend + ": option " + key + " = \"" + name +
                "\" must be a plain file name inside the checkpoint directory, such as \"state.safetensors\"");
  return name;
}

// The names in dir, for messages such as "this directory holds state.pt, metadata.json".
inline std::string list_directory(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "nothing";
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += ", ...";
  return out;
}

// A new file written front to back. commit() makes it durable (fsync) and closes it; a file
// that is destroyed without commit() is closed and left for the manager to discard with its
// temporary directory.
class OutputFile {
 public:
  OutputFile(std::string backend, std::string path) : backend_(std::move(backend)), path_(std::move(path)) {
    do fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) io_fail(backend_, "create", path_, errno);
  }
  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      // Linux moves at most about 2 GiB per call; a short count simply loops.
      const ssize_t n = ::write(fd_, p, std::min<size_t>(size, size_t(1) << 30));
      if (n < 0) {
        if (errno == EINTR) continue;
        io_fail(backend_, "write", path_, errno);
      }
      if (n == 0) io_fail(backend_, "write", path_, EIO);  // no progress: treat as an I/O error
      p += n;
      size -= size_t(n);
    }
  }
  void commit() {
    int rc;
    do rc = ::fsync(fd_);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) io_fail(backend_, "fsync", path_, errno);
    const int fd = fd_;
    fd_ = -1;
    // close() after fsync can still report a deferred write error (NFS); EINTR here must not be
    // retried on Linux, where the descriptor is already gone.
    if (::close(fd) != 0 && errno != EINTR) io_fail(backend_, "close", path_, errno);
  }
  const std::string& path() const { return path_; }

 private:
  std::string backend_, path_;
  int fd_ = -1;
};

// A whole file mapped read-only. Missing files are NOT_FOUND, with what the directory holds.
class MappedInput : public loom::formats::MappedFile {
 public:
  MappedInput(const std::string& backend, const std::string& path) try
      : loom::formats::MappedFile(open_for_reading(backend, path), path) {
    advise(MADV_SEQUENTIAL);  // loads copy front to back
  } catch (const loom::formats::FormatError& e) {
    throw Error(backend + ": " + e.what(), LOOM_STATUS_CODE_INTERNAL);
  }

  // Opens a checkpoint file for reading, refusing what is not a regular file of its own: a
  // symbolic link (it could point out of the folder), a FIFO (reading it would block forever),
  // a device such as /dev/zero (endless). O_NONBLOCK makes opening a FIFO return at once.
  static int open_for_reading(const std::string& backend, const std::string& path) {
    int fd;
    do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT) {
        const size_t slash = path.find_last_of('/');
        const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
        throw Error(backend + ": no file '" + path + "' (the directory holds " + list_directory(dir) +
                        "); was this checkpoint written by another backend or with another `file` option?",
                    LOOM_STATUS_CODE_NOT_FOUND);
      }
      if (err == ELOOP)
        throw Error(backend + ": '" + path + "' is a symbolic link; checkpoint files must be regular files inside " +
                        "the checkpoint folder (copy the file in instead of linking it)",
                    LOOM_STATUS_CODE_INVALID_ARGUMENT);
      io_fail(backend, "open", path, err);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      io_fail(backend, "stat", path, err);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(backend + ": '" + path + "' is not a regular file (" +
                      (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory" : "a device or socket") +
                      "); a checkpoint holds regular files only",
                  LOOM_STATUS_CODE_INVALID_ARGUMENT);
    }
    return fd;
  }
};

// Reads a whole regular file with read(2) straight into a vector, for APIs that want the bytes
// there; a file larger than max_bytes is refused before anything is read.
inline std::vector<char> read_whole_file(const std::string& backend, const std::string& path, uint64_t max_bytes) {
  const int fd = MappedInput::open_for_reading(backend, path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    throw Error(backend + ": '" + path + "' is larger than " + std::to_string(max_bytes >> 20) +
                    " MiB, far more than this file ever holds",
                LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }
  std::vector<char> out(size_t(st.st_size));
  size_t used = 0;
  while (used < out.size()) {  // bounded by the size fstat declared: a growing file is not followed
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      io_fail(backend, "read", path, err);
    }
    if (n == 0) break;
    used += size_t(n);
  }
  ::close(fd);
  out.resize(used);
  return out;
}

}  // namespace loom::ckpt
