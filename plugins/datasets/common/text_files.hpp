// text_files.hpp: which files a text corpus is made of, shared by the `text` dataset and
// loom-tokenize so that both read exactly the same bytes in the same order. Header-only,
// torch-free, SDK-free.
//
// Rules, so a corpus built from a source tree (say ".") is the same on every machine:
//   - Each input is a file (taken whatever its extension) or a directory (walked recursively).
//   - A directory's entries are visited in byte order of their names, depth first.
//   - Files are taken when their extension is in the list (".txt,.md" by default), compared
//     case-sensitively; hidden files (".name") are skipped.
//   - Skipped directories: hidden ones (".git"), any named build* or holding a CMakeCache.txt
//     (build trees), any listed in exclude_dirs (the run output folder), and symlinked ones
//     (no cycles, no leaving the tree). An input named explicitly is always walked.
//   - Inputs keep the order they were given in.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "comma_list.hpp"
#include "data_error.hpp"

namespace loom::data {

namespace fs = std::filesystem;

// ".txt,.md" -> {".txt", ".md"}; spaces around entries are ignored. Throws a bad_input
// DataError for an empty list or an entry that does not start with a dot.
inline std::vector<std::string> parse_extensions(const std::string& csv) {
  std::vector<std::string> out;
  for (std::string& item : split_comma_list(csv)) {
    if (item.empty()) continue;
    if (item[0] != '.' || item.size() < 2)
      throw bad_input("extensions: \"" + item + "\" is not a file extension; write them with a dot, e.g. \".txt,.md\"");
    out.push_back(std::move(item));
  }
  if (out.empty()) throw bad_input("extensions: no extension given; list some, e.g. \".txt,.md\"");
  return out;
}

inline std::string join_extensions(const std::vector<std::string>& extensions) {
  std::string out;
  for (const auto& e : extensions) out += (out.empty() ? "" : ",") + e;
  return out;
}

struct TextWalkOptions {
  std::vector<std::string> extensions = {".txt", ".md"};
  std::vector<fs::path> exclude_dirs;  // skipped when met inside a walked directory
};

namespace detail {

inline bool is_hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

inline bool is_excluded_dir(const fs::path& dir, const TextWalkOptions& options) {
  const std::string name = dir.filename().string();
  std::error_code ec;
  if (is_hidden(dir) || name.rfind("build", 0) == 0 || fs::exists(dir / "CMakeCache.txt", ec)) return true;
  for (const auto& ex : options.exclude_dirs)
    if (fs::equivalent(dir, ex, ec)) return true;
  return false;
}

// Appends the matching files under dir in walk order; counts every entry seen in `seen`.
inline void walk(const fs::path& dir, const TextWalkOptions& options, std::vector<fs::path>& out, size_t& seen) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) throw io_error(dir.string() + ": cannot list the directory: " + ec.message());
  seen += entries.size();
  std::sort(entries.begin(), entries.end(), [](const fs::directory_entry& a, const fs::directory_entry& b) {
    return a.path().filename().string() < b.path().filename().string();
  });
  for (const auto& e : entries) {
    const fs::path& p = e.path();
    if (e.is_symlink(ec) && e.is_directory(ec)) continue;  // never follow directory links
    if (e.is_directory(ec)) {
      if (!is_excluded_dir(p, options)) walk(p, options, out, seen);
    } else if (e.is_regular_file(ec) && !is_hidden(p)) {
      const std::string ext = p.extension().string();
      if (std::find(options.extensions.begin(), options.extensions.end(), ext) != options.extensions.end())
        out.push_back(p);
    }
  }
}

}  // namespace detail

// Every corpus file for `inputs` in corpus order. Relative inputs start at the current
// directory. Throws a bad_input DataError naming the input when one does not exist, is an
// empty directory or holds no matching file.
inline std::vector<fs::path> collect_text_files(const std::vector<std::string>& inputs,
                                                const TextWalkOptions& options) {
  std::vector<fs::path> files;
  for (const std::string& input : inputs) {
    const fs::path p(input);
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (!fs::exists(st)) {
      std::string where;
      if (p.is_relative()) where = " (relative paths start at the current directory, " + fs::current_path(ec).string() + ")";
      throw bad_input(input + ": no such file or directory" + where + "; check the path");
    }
    if (fs::is_regular_file(st)) {
      files.push_back(p);
    } else if (fs::is_directory(st)) {
      const size_t before = files.size();
      size_t seen = 0;
      detail::walk(p, options, files, seen);
      if (seen == 0)
        throw bad_input(input + ": the directory is empty; point the path at text files or a directory holding some");
      if (files.size() == before)
        throw bad_input(input + ": no files ending in " + join_extensions(options.extensions) +
                        " (hidden and build directories are skipped); change extensions or the path");
    } else {
      throw bad_input(input + ": neither a file nor a directory; point the path at text files");
    }
  }
  return files;
}

// Appends the bytes of file to out. Throws an io DataError when it cannot be read.
inline void append_file_bytes(const fs::path& file, std::string& out) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) throw io_error(file.string() + ": cannot open for reading: " + std::generic_category().message(errno));
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) out.append(buffer, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw io_error(file.string() + ": read error");
}

}  // namespace loom::data
