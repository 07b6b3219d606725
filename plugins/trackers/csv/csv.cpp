// csv.cpp: the `csv` tracker. One row per log call, for spreadsheets and pandas:
//
//   step,loss,lr,grad_norm,...,eval_loss
//   5,5.41,0.001,1.92,...,
//   100,3.12,0.001,0.88,...,3.30
//
// Format. RFC 4180 quoting: a field holding a comma, a double quote, CR or LF is quoted and
// its quotes doubled. Records end with LF (every CSV reader accepts it; the RFC's CRLF only
// confuses line-based Unix tools). Numbers round-trip (%.17g); non-finite values are written
// nan, inf, -inf; a metric absent from a log call leaves its cell blank.
//
// Columns. `step`, then every metric in the order it first appeared. When a later log brings
// a new metric (eval_loss first appears at the first eval step) the file is rewritten with
// the widened header and blank cells in the earlier rows: a temp file in the same folder,
// fsync'd, then renamed over the old one, so a crash leaves either the old or the new file.
// That happens once per new metric, not per row.
//
// Resume. An existing file is continued: its header is read back. resume(N) drops the rows
// with step > N the same way (temp file, rename), so steps never repeat or go back. A session
// whose first log comes without a resume() call (a restart with no checkpoint) drops the
// rows at or after its first logged step. A torn last row (a crash mid-write) is dropped too.
// Only rank 0 writes.
#include <loom/tracker.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string quote(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string join(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + quote(fields[i]);
  return line + "\n";
}

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Reads one RFC 4180 record into fields; false at the end of input. complete: the record
// ended with a line break (a torn last row has none).
bool read_record(std::istream& in, std::vector<std::string>& fields, bool& complete) {
  fields.clear();
  complete = false;
  int c = in.get();
  if (c == EOF) return false;
  std::string field;
  bool quoted = false;
  for (; c != EOF; c = in.get()) {
    if (quoted) {
      if (c != '"') field += char(c);
      else if (in.peek() == '"') field += char(in.get());
      else quoted = false;
    } else if (c == '"' && field.empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      complete = true;
      break;
    } else if (c != '\r' || in.peek() != '\n') {
      field += char(c);
    }
  }
  fields.push_back(std::move(field));
  return true;
}

bool parse_step(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw loom::Error("csv: " + what + " '" + path + "': " + std::strerror(err), LOOM_STATUS_CODE_INTERNAL);
}

class Csv final : public loom::Tracker {
 public:
  static constexpr const char* name = "csv";
  static constexpr const char* summary = "Writes every logged metric to a CSV file, one row per log.";
  static constexpr loom_option_spec options[] = {
      loom::option("path", LOOM_OPTION_TYPE_STRING, "metrics.csv",
                   "File to write; a relative path is inside the run directory."),
  };

  Csv(const loom::Config& c, const loom::Context& ctx) : enabled_(ctx.rank == 0) {
    if (!enabled_) return;
    fs::path path = c.str("path");
    if (path.empty()) throw loom::Error("csv: path is empty; set it to a file name such as \"metrics.csv\"");
    if (path.is_relative()) path = fs::path(ctx.run_dir) / path;
    path_ = path.string();
    scan();
    open_append();
  }

  ~Csv() override {
    if (file_ != nullptr) std::fclose(file_);
  }

  void log(int64_t step, const Metrics& metrics) override {
    if (!enabled_) return;
    if (!started_) resume(step - 1);
    std::vector<std::string> header = columns_.empty() ? std::vector<std::string>{"step"} : columns_;
    for (const loom::Metric& m : metrics)
      if (m.name != nullptr && std::find(header.begin() + 1, header.end(), m.name) == header.end())
        header.push_back(m.name);
    if (columns_.empty()) {  // a new file
      write(join(header));
      columns_ = header;
    } else if (header.size() > columns_.size()) {
      rewrite(header, std::numeric_limits<int64_t>::max());  // widen
    }
    std::vector<std::string> cells(columns_.size());
    cells[0] = std::to_string(step);
    for (const loom::Metric& m : metrics)
      if (m.name != nullptr) cells[size_t(column(m.name))] = number(m.value);
    write(join(cells));
    max_step_ = std::max(max_step_, step);
  }

  void resume(int64_t step) override {
    if (!enabled_) return;
    started_ = true;
    if (max_step_ > step || dirty_) rewrite(columns_, step);
  }

 private:
  int column(const std::string& metric) const {
    for (size_t i = 1; i < columns_.size(); ++i)
      if (columns_[i] == metric) return int(i);
    return -1;
  }

  // Reads back an existing file: its header, its last step, and whether it needs repair.
  void scan() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return;  // a new file
    std::vector<std::string> fields;
    bool complete = false;
    if (!read_record(in, fields, complete)) return;  // empty
    if (!complete && std::string("step").rfind(fields[0], 0) == 0) {
      in.close();  // torn while the header itself was written: start over
      fs::resize_file(path_, 0);
      return;
    }
    if (fields[0] != "step")
      throw loom::Error("csv: '" + path_ + "' exists but is not a metrics CSV (its first column is not 'step'); "
                        "set path to another file");
    columns_ = fields;
    while (read_record(in, fields, complete)) {
      int64_t step = 0;
      if (!complete || !parse_step(fields[0], step)) dirty_ = true;
      else max_step_ = std::max(max_step_, step);
    }
  }

  void open_append() {
    file_ = std::fopen(path_.c_str(), "ab");
    if (file_ == nullptr) fail("cannot open", path_, errno);
  }

  void write(const std::string& line) {
    if (file_ == nullptr) open_append();  // after a rewrite, or a failed one
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
      fail("cannot write", path_, errno);
  }

  // Rewrites the file with `header` and the whole rows whose step <= last, each padded to
  // the header's width: temp file, fsync, rename, fsync of the folder. On failure the old
  // file stays as it was.
  void rewrite(const std::vector<std::string>& header, int64_t last) {
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
    const std::string tmp = path_ + ".tmp";
    FILE* out = std::fopen(tmp.c_str(), "wb");
    if (out == nullptr) fail("cannot create", tmp, errno);
    int64_t max_step = std::numeric_limits<int64_t>::min();
    try {
      std::string text = join(header);
      std::ifstream in(path_, std::ios::binary);
      std::vector<std::string> fields;
      bool complete = false;
      for (bool first = true; in && read_record(in, fields, complete); first = false) {
        int64_t step = 0;
        if (first || !complete || !parse_step(fields[0], step) || step > last) continue;
        if (fields.size() < header.size()) fields.resize(header.size());
        text += join(fields);
        max_step = std::max(max_step, step);
        if (text.size() > (1u << 20)) flush_to(out, tmp, text);
      }
      flush_to(out, tmp, text);
      if (std::fflush(out) != 0 || ::fsync(fileno(out)) != 0) fail("cannot write", tmp, errno);
    } catch (...) {
      std::fclose(out);
      std::remove(tmp.c_str());
      throw;
    }
    std::fclose(out);
    if (std::rename(tmp.c_str(), path_.c_str()) != 0) fail("cannot replace", path_, errno);
    const std::string parent = fs::path(path_).parent_path().string();
    const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY);
    if (dir >= 0) {
      ::fsync(dir);  // make the rename itself durable
      ::close(dir);
    }
    columns_ = header;
    max_step_ = max_step;
    dirty_ = false;
  }

  static void flush_to(FILE* out, const std::string& path, std::string& text) {
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size()) fail("cannot write", path, errno);
    text.clear();
  }

  bool enabled_;
  std::string path_;
  FILE* file_ = nullptr;
  std::vector<std::string> columns_;  // "step", then metrics; empty until the header exists
  int64_t max_step_ = std::numeric_limits<int64_t>::min();
  bool dirty_ = false;    // the file ends in a torn or unreadable row
  bool started_ = false;  // resume() or the first log has trimmed the file
};

}  // namespace

LOOM_PLUGIN("csv", "0.1.0", loom::component<Csv>())
