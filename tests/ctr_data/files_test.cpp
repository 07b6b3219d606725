// The criteo_tsv file list and line reader (plugins/datasets/criteo_tsv/tsv_files.hpp): lines and
// byte offsets, restarting at an offset, the 1 MiB line cap, and refusing FIFOs, directories and
// missing files without blocking.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/datasets/criteo_tsv/criteo_line.hpp"
#include "plugins/datasets/common/data_error.hpp"
#include "run_host.hpp"
#include "plugins/datasets/criteo_tsv/tsv_files.hpp"

using namespace loom::criteo;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const loom::data::DataError& e) {
    return e.what();
  }
  return "";
}

struct Line {
  std::string text;
  uint64_t line_no, offset_after;
  bool operator==(const Line& o) const {
    return text == o.text && line_no == o.line_no && offset_after == o.offset_after;
  }
};

std::vector<Line> read_all(const std::string& path, uint64_t offset = 0, uint64_t line_no = 0) {
  LineReader r(path, offset, line_no);
  std::vector<Line> out;
  std::string_view line;
  while (r.next(line)) out.push_back({std::string(line), r.line_no(), r.offset()});
  return out;
}

}  // namespace

TEST_CASE("LineReader returns lines without '\\n', their numbers and the offset after each, from any line start") {
  const fs::path dir = loom_test::tmp_dir("ctr-files-lines");
  const std::string path = (dir / "a.tsv").string();
  write(path, "ab\n\ncde\nf");  // an empty line, and a last line without '\n'
  const std::vector<Line> all = {{"ab", 1, 3}, {"", 2, 4}, {"cde", 3, 8}, {"f", 4, 9}};
  CHECK(read_all(path) == all);
  CHECK(read_all(path, 4, 2) == std::vector<Line>(all.begin() + 2, all.end()));
  CHECK(read_all(path, 9, 4).empty());
  write(path, "");
  CHECK(read_all(path).empty());
}

TEST_CASE("LineReader takes a line of exactly 1 MiB and refuses a longer one, naming file:line") {
  const fs::path dir = loom_test::tmp_dir("ctr-files-long");
  const std::string path = (dir / "long.tsv").string();
  write(path, "x\n" + std::string(kMaxLineBytes, 'y') + "\n" + std::string(kMaxLineBytes + 1, 'z') + "\nw\n");
  LineReader r(path, 0, 0);
  std::string_view line;
  REQUIRE(r.next(line));
  REQUIRE(r.next(line));
  CHECK(line.size() == kMaxLineBytes);
  const std::string expected = path + ":3: the line is longer than 1 MiB (1048576 bytes); Criteo lines are a few "
                               "hundred bytes, so this is not a Criteo TSV file or its lines lack newlines";
  CHECK(error_of([&] { r.next(line); }) == expected);
  write(path, "x\n" + std::string(3 * kMaxLineBytes, 'z'));  // no newline at all
  CHECK(error_of([&] { read_all(path); }) == expected.substr(0, expected.find(":3:")) + ":2:" +
                                                   expected.substr(expected.find(":3:") + 3));
}

TEST_CASE("a FIFO, a directory in a list and a missing file are refused at once with what they are") {
  const fs::path dir = loom_test::tmp_dir("ctr-files-kinds");
  const std::string fifo = (dir / "pipe.tsv").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  uint64_t size = 0;
  // No writer ever opens the FIFO: a blocking open would hang this test.
  CHECK(error_of([&] { open_regular_file(fifo, size); }) ==
        fifo + ": is a FIFO (named pipe), not a regular file; `files` takes TSV files, or one directory alone");
  CHECK(error_of([&] { resolve_files(fifo); }) ==
        fifo + ": is a FIFO (named pipe), not a regular file; `files` takes TSV files, or one directory alone");
  write(dir / "a.tsv", "1\n");
  CHECK(error_of([&] { resolve_files((dir / "a.tsv").string() + "," + dir.string()); }) ==
        dir.string() + ": is a directory, not a regular file; `files` takes TSV files, or one directory alone");
  CHECK(error_of([&] { resolve_files((dir / "gone.tsv").string()); }) ==
        (dir / "gone.tsv").string() + ": no such file; check `files`");
  CHECK(error_of([&] { resolve_files("a.tsv,,b.tsv"); }) ==
        "criteo_tsv: files \"a.tsv,,b.tsv\" has an empty entry; list TSV files separated by ',', or name one "
        "directory");
}

TEST_CASE("a directory gives its regular *.tsv files sorted by name; a list keeps its order") {
  const fs::path dir = loom_test::tmp_dir("ctr-files-dir");
  for (const char* name : {"day_2.tsv", "day_10.tsv", "day_1.tsv", ".hidden.tsv", "notes.txt", "truth.json"})
    write(dir / name, "0\n");
  fs::create_directories(dir / "sub.tsv");
  const std::string d = dir.string();
  CHECK(resolve_files(d) == std::vector<std::string>{d + "/day_1.tsv", d + "/day_10.tsv", d + "/day_2.tsv"});
  CHECK(resolve_files(d + "/day_2.tsv, " + d + "/day_1.tsv") ==
        std::vector<std::string>{d + "/day_2.tsv", d + "/day_1.tsv"});
  const fs::path empty = loom_test::tmp_dir("ctr-files-empty-dir");
  CHECK(error_of([&] { resolve_files(empty.string()); }) ==
        empty.string() + ": the directory holds no *.tsv file; point `files` at TSV files or a directory of them");
}
