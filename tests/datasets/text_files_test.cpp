// The corpus walk shared by the `text` dataset and loom-tokenize
// (plugins/datasets/common/text_files.hpp): which files, in which order, and the refusals.
#include <doctest/doctest.h>

#include "expect_data_error.hpp"

#include <fstream>
#include <string>
#include <vector>

#include "run_host.hpp"
#include "plugins/datasets/common/text_files.hpp"

using namespace loom::data;
namespace fs = std::filesystem;

using loom_test::contains;
using loom_test::error_of;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Paths relative to root, in walk order.
std::vector<std::string> walk(const fs::path& root, const TextWalkOptions& options = {}) {
  std::vector<std::string> out;
  for (const auto& f : collect_text_files({root.string()}, options)) out.push_back(f.lexically_relative(root).string());
  return out;
}


}  // namespace

TEST_CASE("a directory walk is recursive, byte-ordered, filtered by extension, and skips build and hidden dirs") {
  const fs::path root = loom_test::tmp_dir("walk-tree");
  for (const char* f : {"b.txt", "B.md", "a/z.txt", "a/y/x.md", "a/notes.rst", "a.txt", ".hidden.txt", ".git/HEAD.txt",
                        "build/out.txt", "build-gpu/out.md", "cmake-out/CMakeCache.txt", "cmake-out/gen.txt",
                        "runs/r1/log.txt", "docs/guide.md"})
    write(root / f, f);
  fs::create_directory_symlink(root / "a", root / "link-to-a");

  CHECK(walk(root) == std::vector<std::string>{"B.md", "a/y/x.md", "a/z.txt", "a.txt", "b.txt", "docs/guide.md",
                                               "runs/r1/log.txt"});
  TextWalkOptions only_rst;
  only_rst.extensions = {".rst"};
  CHECK(walk(root, only_rst) == std::vector<std::string>{"a/notes.rst"});
  TextWalkOptions no_runs;
  no_runs.exclude_dirs = {root / "runs"};
  CHECK(walk(root, no_runs) == std::vector<std::string>{"B.md", "a/y/x.md", "a/z.txt", "a.txt", "b.txt", "docs/guide.md"});
  // A directory named explicitly is walked even when a walk would skip it.
  CHECK(walk(root / "build") == std::vector<std::string>{"out.txt"});
}

TEST_CASE("explicit files are taken whatever their extension, inputs keep their order") {
  const fs::path root = loom_test::tmp_dir("walk-files");
  write(root / "one.rst", "1");
  write(root / "dir/two.txt", "2");
  const auto files = collect_text_files({(root / "one.rst").string(), (root / "dir").string()}, {});
  REQUIRE(files.size() == 2);
  CHECK(files[0] == root / "one.rst");
  CHECK(files[1] == root / "dir" / "two.txt");
  std::string bytes;
  for (const auto& f : files) append_file_bytes(f, bytes);
  CHECK(bytes == "12");
}

TEST_CASE("a missing input, an empty directory and a directory without matching files are refused") {
  const fs::path root = loom_test::tmp_dir("walk-errors");
  const std::string missing = (root / "nope").string();
  CHECK(error_of([&] { collect_text_files({missing}, {}); }) == missing + ": no such file or directory; check the path");
  CHECK(contains(error_of([] { collect_text_files({"surely/not/here"}, {}); }),
                 "relative paths start at the current directory, " + fs::current_path().string()));
  fs::create_directories(root / "empty");
  const std::string empty = (root / "empty").string();
  CHECK(error_of([&] { collect_text_files({empty}, {}); }) ==
        empty + ": the directory is empty; point the path at text files or a directory holding some");
  write(root / "code/main.cpp", "int main() {}");
  const std::string code = (root / "code").string();
  const std::string none = error_of([&] { collect_text_files({code}, {}); });
  CHECK(none.rfind(code + ": no files ending in .txt,.md", 0) == 0);
  CHECK(contains(none, "change extensions or the path"));
}

TEST_CASE("extensions parse from a comma-separated list and refuse entries without a dot") {
  CHECK(parse_extensions(".cpp,.hpp, .h ,.md,") == std::vector<std::string>{".cpp", ".hpp", ".h", ".md"});
  CHECK(contains(error_of([] { parse_extensions("cpp,.h"); }), "\"cpp\" is not a file extension"));
  CHECK(contains(error_of([] { parse_extensions(" , "); }), "no extension given"));
}
