// mapped_file.hpp: a token file mapped read-only (formats/files.hpp's MappedFile, whose pages
// the reader hands back after use so that the resident set stays small however large the file),
// opened by token_file's own rules and messages.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "plugins/datasets/common/data_error.hpp"
#include "formats/files.hpp"
#include "formats/format_error.hpp"

namespace loom::data {

// A token file mapped read-only by formats' MappedFile, opened by this dataset's rules so that
// each refusal tells a token_file user what to do.
class MappedTokenFile : public loom::formats::MappedFile {
 public:
  // Maps `path` read-only. `missing_hint` ends the message for a file that does not exist.
  // Throws a bad_input DataError for a missing, unreadable or non-regular file and an io one
  // when mapping fails.
  MappedTokenFile(const std::string& path, const std::string& missing_hint) try
      : loom::formats::MappedFile(open_token_file(path, missing_hint), path) {
  } catch (const loom::formats::FormatError& e) {
    throw io_error(e.what());
  }

 private:
  static int open_token_file(const std::string& path, const std::string& missing_hint) {
    int fd;
    do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);  // a FIFO must not block
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      const int err = errno;
      std::string where;
      std::error_code ec;
      if (std::filesystem::path(path).is_relative())
        where = " (relative paths start at the current directory, " + std::filesystem::current_path(ec).string() + ")";
      if (err == ENOENT) throw bad_input(path + ": no such file" + where + "; " + missing_hint);
      throw bad_input(path + ": cannot open: " + std::strerror(err) + where + "; check the path and its permissions");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      const bool dir = S_ISDIR(st.st_mode);
      ::close(fd);
      throw bad_input(path + (dir ? ": is a directory" : ": is not a regular file") +
                      "; point path at one token file made by loom-tokenize (the `text` dataset reads directories "
                      "of text files)");
    }
    return fd;
  }
};

}  // namespace loom::data
