// tsv_stream.cpp: passes over files cut into windows (tsv_stream.hpp).
#include "tsv_stream.hpp"

#include <unistd.h>

#include <utility>

#include "plugins/datasets/common/data_error.hpp"

namespace loom::criteo {

using loom::data::bad_input;

TsvStream::TsvStream(std::vector<std::string> files, uint64_t window_rows, uint64_t passes)
    : files_(std::move(files)), window_rows_(window_rows), passes_(passes) {}

TsvStream::Event TsvStream::next(std::string_view& line) {
  for (;;) {
    if (window_rows_ > 0 && pos_.line_in_window == window_rows_) {
      pos_.line_in_window = 0;
      return Event::window_end;
    }
    if (passes_ > 0 && pos_.pass >= passes_) return Event::stream_end;
    if (pos_.file == files_.size()) {
      // Without this an endless run over emptied files would spin here forever.
      if (pos_.line_in_pass == 0)
        throw bad_input("criteo_tsv: a whole pass over the " + std::to_string(files_.size()) +
                        " file(s) read no line (were they emptied?); check `files`");
      const bool partial_window = pos_.line_in_window > 0;
      pos_ = StreamPosition{pos_.pass + 1, 0, 0, 0, 0, 0};
      if (partial_window) return Event::window_end;
      continue;
    }
    if (read_line(line)) return Event::line;
    next_file();
    if (window_rows_ == 0) {
      pos_.line_in_window = 0;
      return Event::window_end;
    }
  }
}

bool TsvStream::read_line(std::string_view& line) {
  if (!reader_) reader_ = std::make_unique<LineReader>(files_[size_t(pos_.file)], pos_.offset, pos_.line_in_file);
  if (!reader_->next(line)) return false;  // at the end it stays there: asking again answers false again
  pos_.offset = reader_->offset();
  ++pos_.line_in_file;
  ++pos_.line_in_pass;
  ++pos_.line_in_window;
  return true;
}

void TsvStream::next_file() {
  reader_.reset();
  ++pos_.file;
  pos_.offset = 0;
  pos_.line_in_file = 0;
}

bool TsvStream::next_line_in_window(std::string_view& line) {
  if (window_rows_ > 0 && pos_.line_in_window == window_rows_) return false;
  for (;;) {
    if ((passes_ > 0 && pos_.pass >= passes_) || pos_.file == files_.size()) return false;  // next() ends the pass
    if (read_line(line)) return true;
    if (window_rows_ == 0) return false;  // the file's end ends the window: an event for next()
    next_file();                          // the window goes on in the next file
  }
}

void TsvStream::seek(const StreamPosition& p) {
  const auto refuse = [](const std::string& why) {
    throw bad_input("criteo_tsv: the saved dataset state " + why +
                    "; resume with the data and options that wrote the checkpoint, or start a fresh run");
  };
  const auto n = [](uint64_t v) { return std::to_string(v); };
  if (passes_ > 0 && p.pass > passes_) refuse("is in pass " + n(p.pass + 1) + " but passes = " + n(passes_));
  if (p.file > files_.size()) refuse("names file " + n(p.file + 1) + " of " + n(files_.size()));
  const bool between_files = p.file == files_.size() || (passes_ > 0 && p.pass == passes_);
  if (between_files && (p.offset != 0 || p.line_in_file != 0)) refuse("holds a read position outside any file");
  if (passes_ > 0 && p.pass == passes_ && (p.file != 0 || p.line_in_pass != 0 || p.line_in_window != 0))
    refuse("is past the last pass but holds a read position");
  if (p.line_in_file > p.line_in_pass || p.line_in_file > p.offset || (p.offset > 0 && p.line_in_file == 0))
    refuse("holds line counts that do not match its byte offset");
  if (window_rows_ == 0 ? p.line_in_window != p.line_in_file : p.line_in_window > window_rows_)
    refuse("holds " + n(p.line_in_window) + " lines in its window, which window_rows = " + n(window_rows_) +
           " cannot give");
  if (!between_files && p.offset > 0) {
    const std::string& path = files_[size_t(p.file)];
    uint64_t size = 0;
    const int fd = open_regular_file(path, size);
    char before = 0;
    const bool read = p.offset <= size && ::pread(fd, &before, 1, off_t(p.offset - 1)) == 1;
    ::close(fd);
    if (p.offset > size) refuse("points at byte " + n(p.offset) + " of " + path + ", which has " + n(size));
    if (!read || (before != '\n' && p.offset != size))
      refuse("points at byte " + n(p.offset) + " of " + path + ", which is not the start of a line");
  }
  reader_.reset();
  pos_ = p;
}

}  // namespace loom::criteo
