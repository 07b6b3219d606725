// tsv_stream.hpp: the lines of a list of files, read `passes` times, cut into windows, as a
// sequence of events: a line, a window end, the end of the stream. The position between two
// events is a few integers (StreamPosition), which is what makes an exact resume possible.
//
// Windows: window_rows = 0 makes each file one window (an empty file is an empty window);
// window_rows = N > 0 ends a window after every N lines, and the end of a pass ends a window
// that holds any line, so no window spans two passes. Torch-free, SDK-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tsv_files.hpp"

namespace loom::criteo {

struct StreamPosition {
  uint64_t pass = 0;            // passes completed
  uint64_t file = 0;            // the file being read; = the number of files: this pass's are read
  uint64_t offset = 0;          // where that file's next line starts
  uint64_t line_in_file = 0;    // lines of that file read
  uint64_t line_in_pass = 0;    // lines of this pass read (= the stream index of the next line)
  uint64_t line_in_window = 0;  // lines of the current window read
};

class TsvStream {
 public:
  enum class Event { line, window_end, stream_end };

  // files: non-empty, as resolve_files gives them. passes = 0: endless.
  TsvStream(std::vector<std::string> files, uint64_t window_rows, uint64_t passes);

  // The next event; for Event::line, `line` is valid until the next call. After the last pass
  // every call returns stream_end. Throws a DataError from the reader, or a bad_input one when
  // a whole pass held no line (the files were emptied since create).
  Event next(std::string_view& line);

  // The next line if the current window holds another before any event; otherwise false,
  // with no event consumed (a window's or pass's end stays for next()).
  bool next_line_in_window(std::string_view& line);

  const StreamPosition& position() const { return pos_; }
  // Moves to a saved position. Throws a bad_input DataError when p cannot be a position of these
  // files with this window_rows and passes (corrupt state, or the data changed since).
  void seek(const StreamPosition& p);

  // Where the line last returned came from, for messages: its file and 1-based line number.
  const std::string& file() const { return files_[size_t(pos_.file)]; }
  uint64_t line_no() const { return pos_.line_in_file; }

 private:
  bool read_line(std::string_view& line);  // from the open file (opened here if need be)
  void next_file();                         // to the start of the next file of the pass

  std::vector<std::string> files_;
  uint64_t window_rows_, passes_;
  StreamPosition pos_;
  std::unique_ptr<LineReader> reader_;  // open on files_[pos_.file] while it is being read
};

}  // namespace loom::criteo
