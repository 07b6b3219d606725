// criteo_tsv.cpp: the `criteo_tsv` dataset. Streams click logs in the Criteo TSV layout
// (criteo_line.hpp: label, dense counts, hex categorical ids, ragged cells allowed) from a list
// of files, `passes` times, in windows (tsv_stream.hpp). Each window's lines are dealt round
// robin over the ranks (line j of a window goes to rank j % world_size); each rank batches its
// own lines, the last batch of a window may be smaller, and the end of every window is
// reported as an epoch end (Dataset::epoch_end()), so hooks acting on epoch_end, such as an
// evaluation, run after each window on every rank. Every rank gives a window as many batches as
// rank 0 (which holds the most lines): a rank with fewer adds empty batches (B = 0) before the
// window's end, so all ranks reach it in the same step. After the last pass next() returns
// Dataset::data_end() for good. Batch layout: criteo_batch_builder.hpp. Resume record: ctr_state.hpp.
// Torch-free.
#include <loom/dataset.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plugins/datasets/common/comma_list.hpp"
#include "criteo_line.hpp"
#include "criteo_batch_builder.hpp"
#include "ctr_state.hpp"
#include "plugins/datasets/common/dataset_plugin.hpp"
#include "tsv_files.hpp"
#include "tsv_stream.hpp"

namespace {

using namespace loom::criteo;
using loom::data::with_loom_errors;

int64_t in_range(const loom::Config& c, const char* key, int64_t lo, int64_t hi) {
  const int64_t v = c.i64(key);
  if (v < lo || v > hi)
    throw loom::Error(std::string("criteo_tsv: ") + key + " must be from " + std::to_string(lo) + " to " +
                      std::to_string(hi) + ", got " + std::to_string(v));
  return v;
}

// table_rows: one count for every feature, or a comma list with one per feature.
std::vector<uint64_t> parse_table_rows(const std::string& text, int64_t sparse) {
  std::vector<uint64_t> rows;
  for (const std::string& item : loom::data::split_comma_list(text)) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1)
      throw loom::Error("criteo_tsv: table_rows entry \"" + item + "\" is not a positive integer; write one row count, "
                        "or one per categorical feature separated by ','");
    rows.push_back(uint64_t(v));
  }
  if (rows.size() == 1) return std::vector<uint64_t>(size_t(sparse), rows[0]);
  if (int64_t(rows.size()) != sparse)
    throw loom::Error("criteo_tsv: table_rows lists " + std::to_string(rows.size()) + " row counts but sparse_features = " +
                      std::to_string(sparse) + "; give one count for all features or exactly one per feature");
  return rows;
}

class CriteoTsv final : public loom::Dataset {
 public:
  static constexpr const char* name = "criteo_tsv";
  static constexpr const char* summary =
      "Click logs in the Criteo TSV layout (label, dense counts, hex categorical ids, multi-hot allowed), streamed "
      "in windows that end as epochs, sharded line by line across ranks; exact resume.";
  static constexpr loom_option_spec options[] = {
      loom::required_option("files", LOOM_OPTION_TYPE_STRING,
                            "TSV files read in order, separated by ','; or one directory, whose *.tsv files are read "
                            "sorted by name."),
      loom::option("batch_size", LOOM_OPTION_TYPE_INT, "256",
                   "Samples per batch on each rank; a window's last batch may be smaller (or empty on a rank "
                   "holding fewer of its lines, so every rank ends the window in the same step)."),
      loom::option("dense_features", LOOM_OPTION_TYPE_INT, "13",
                   "Integer columns after the label; x becomes log(1 + x), and 0 when empty or x <= 0."),
      loom::option("sparse_features", LOOM_OPTION_TYPE_INT, "26",
                   "Categorical columns after the dense ones; a cell holds no id, one hex id, or several joined by ','."),
      loom::option("table_rows", LOOM_OPTION_TYPE_STRING, "100000",
                   "Embedding rows per categorical feature, one count or one per feature (','); hex id v of feature f "
                   "(from 0) goes to row splitmix64(v + 0x9E3779B97F4A7C15 * (f + 1)) % rows."),
      loom::option("window_rows", LOOM_OPTION_TYPE_INT, "0",
                   "Lines per window; each window's end is reported as an epoch end. 0: each file is one window."),
      loom::option("passes", LOOM_OPTION_TYPE_INT, "1",
                   "Times the files are read; after the last pass the data ends and the run stops. 0: endless."),
      loom::option("max_ids_per_feature", LOOM_OPTION_TYPE_INT, "64",
                   "Most ids one categorical cell may hold; a cell with more is an error naming file:line."),
  };

  CriteoTsv(const loom::Config& c, const loom::Context& ctx)
      : batch_size_(in_range(c, "batch_size", 1, int64_t(1) << 20)),
        rank_(uint32_t(ctx.rank)),
        world_size_(uint32_t(ctx.world_size)),
        format_(make_format(c)),
        files_(with_loom_errors([&] { return resolve_files(c.str("files"), &bytes_); })),
        window_rows_(uint64_t(in_range(c, "window_rows", 0, INT64_MAX))),
        stream_(files_, window_rows_, uint64_t(in_range(c, "passes", 0, INT64_MAX))) {
    if (ctx.rank < 0 || ctx.rank >= ctx.world_size)
      throw loom::Error("criteo_tsv: rank " + std::to_string(ctx.rank) + " is outside world size " +
                        std::to_string(ctx.world_size));
    if (bytes_ == 0)
      throw loom::Error("criteo_tsv: the " + std::to_string(files_.size()) +
                        " file(s) of `files` are empty; point it at Criteo TSV data");
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              std::to_string(files_.size()) + " file(s), " + std::to_string(bytes_) + " bytes; " +
                  std::to_string(format_.dense) + " dense and " + std::to_string(format_.sparse) +
                  " categorical features; batches of " + std::to_string(batch_size_) + " on rank " +
                  std::to_string(rank_) + " of " + std::to_string(world_size_) + "; " +
                  (window_rows_ == 0 ? std::string("one window per file")
                                     : "windows of " + std::to_string(window_rows_) + " lines"));
  }

  Batch next() override {
    return with_loom_errors([&]() -> Batch {
      BatchBuilder builder(format_.dense, format_.sparse);
      std::string_view line;
      for (;;) {
        if (padding_due_ > 0) {  // empty: builder holds nothing here
          --padding_due_;
          return builder.take();
        }
        if (window_end_due_) {
          window_end_due_ = false;
          ++windows_ended_;
          return epoch_end();
        }
        switch (stream_.next(line)) {
          case TsvStream::Event::line: {
            const StreamPosition& at = stream_.position();
            window_lines_ = at.line_in_window;
            if ((at.line_in_window - 1) % world_size_ != rank_) break;  // another rank's line
            parse_line(line, format_, stream_.file(), stream_.line_no(), sample_);
            builder.add(int64_t(at.line_in_pass - 1), sample_);
            if (builder.rows() == batch_size_) {
              skip_rest_of_round();
              return builder.take();
            }
            break;
          }
          case TsvStream::Event::window_end:
            padding_due_ = padding_for(window_lines_);
            window_end_due_ = true;
            window_lines_ = 0;
            if (builder.rows() > 0) return builder.take();
            break;
          case TsvStream::Event::stream_end:
            return data_end();  // every window ended before, so no sample is pending
        }
      }
    });
  }

  // Windows vary in length, so there is no fixed epoch to report.
  int64_t batches_per_epoch() const override { return 0; }

  std::string save_state() const override {
    SavedState s;
    s.rank = rank_;
    s.world_size = world_size_;
    s.batch_size = uint64_t(batch_size_);
    if (shared_position()) {  // every rank is here, whatever their number: any may resume it
      s.rank = 0;
      s.world_size = kAnyWorldSize;
      s.batch_size = 0;
    }
    s.window_end_due = window_end_due_;
    s.window_rows = window_rows_;
    s.file_count = files_.size();
    s.position = stream_.position();
    s.windows_ended = windows_ended_;
    s.padding_due = padding_due_;
    return encode_state(s);
  }

  void load_state(const std::string& state) override {
    with_loom_errors([&] {
      const SavedState s = decode_state(state);
      const auto differs = [](const char* what, uint64_t then, uint64_t now, const char* fix) {
        if (then != now)
          throw loom::data::bad_input(std::string("criteo_tsv: the saved dataset state was written with ") + what +
                                      " " + std::to_string(then) + " but this run has " + std::to_string(now) + "; " +
                                      fix);
      };
      if (s.world_size == kAnyWorldSize) {  // a position every rank shared: see shared_position()
        if (s.rank != 0 || s.batch_size != 0 || s.window_end_due || s.padding_due != 0)
          throw loom::data::bad_input("criteo_tsv: the saved dataset state is marked as shared by every rank but "
                                      "holds one rank's values; resume from another checkpoint or start a fresh run");
        // Each of this run's ranks must have taken the same whole batches of the lines read.
        const uint64_t read = s.position.line_in_window;
        if (read % world_size_ != 0 || (read / world_size_) % uint64_t(batch_size_) != 0)
          throw loom::data::bad_input(
              "criteo_tsv: the saved dataset state is " + std::to_string(read) + " lines into its window, which " +
              std::to_string(world_size_) + " ranks with batch_size " + std::to_string(batch_size_) +
              " cannot have read in whole batches; keep the global batch (ranks x batch_size) of the run that wrote it");
      } else {
        differs("world size", s.world_size, world_size_,
                "resume on the same number of ranks (this position, at a window's end that the ranks' batches "
                "did not fill alike, is one rank's own; a checkpoint of another step resumes at any rank count)");
        differs("rank", s.rank, rank_, "each rank must load its own state");
        differs("batch_size", s.batch_size, uint64_t(batch_size_), "set the same [data] batch_size");
      }
      differs("window_rows", s.window_rows, window_rows_, "set the same [data] window_rows");
      differs("a file count of", s.file_count, files_.size(), "restore the files the run was reading");
      if (s.window_end_due && s.position.line_in_window != 0)
        throw loom::data::bad_input("criteo_tsv: the saved dataset state has a window end due inside a window; "
                                    "resume from another checkpoint or start a fresh run");
      // Padding is owed only before a window end, is at most one batch, and rank 0 never pads.
      if (s.padding_due > 1 || (s.padding_due > 0 && (!s.window_end_due || rank_ == 0)))
        throw loom::data::bad_input("criteo_tsv: the saved dataset state owes " + std::to_string(s.padding_due) +
                                    " empty batches" + (s.window_end_due ? (rank_ == 0 ? " on rank 0" : "") : " inside a window") +
                                    ", which no window gives; resume from another checkpoint or start a fresh run");
      stream_.seek(s.position);
      window_end_due_ = s.window_end_due;
      windows_ended_ = s.windows_ended;
      padding_due_ = s.padding_due;
      window_lines_ = s.position.line_in_window;
    });
  }

 private:
  // Inside a window, every rank has taken the same number of whole batches, so the first
  // k x world_size lines are read. A rank whose batch just filled reads on past the other ranks'
  // lines of that round (skip_rest_of_round), so every rank then stands at line k x world_size:
  // a position any number of ranks can go on from (each taking every n-th line after it). Only
  // a window's end (padding, an end not yet reported) keeps a position that is one rank's own.
  bool shared_position() const {
    return !window_end_due_ && padding_due_ == 0 && stream_.position().line_in_window % world_size_ == 0;
  }

  // Reads the lines after this rank's last that belong to higher ranks of the same round, as far
  // as this window holds them (they are not this rank's; the next call would skip them).
  void skip_rest_of_round() {
    std::string_view line;
    while (stream_.position().line_in_window % world_size_ != 0 && stream_.next_line_in_window(line)) {
    }
    window_lines_ = stream_.position().line_in_window;
  }

  // Empty batches this rank adds at the end of a window of W lines so that it gives as many
  // batches as rank 0, which holds the most lines, ceil(W / world): at most one.
  uint64_t padding_for(uint64_t W) const {
    const uint64_t B = uint64_t(batch_size_);
    const uint64_t most = (W + world_size_ - 1) / world_size_;
    const uint64_t mine = W > rank_ ? (W - rank_ - 1) / world_size_ + 1 : 0;
    return (most + B - 1) / B - (mine + B - 1) / B;
  }

  static LineFormat make_format(const loom::Config& c) {
    LineFormat f;
    f.dense = in_range(c, "dense_features", 0, 4096);
    f.sparse = in_range(c, "sparse_features", 0, 4096);
    f.max_ids_per_feature = in_range(c, "max_ids_per_feature", 1, 65536);
    f.table_rows = parse_table_rows(c.str("table_rows"), f.sparse);
    return f;
  }

  int64_t batch_size_;
  uint32_t rank_, world_size_;
  LineFormat format_;
  Sample sample_;         // reused parse buffers
  uint64_t bytes_ = 0;  // of all files, at create
  std::vector<std::string> files_;
  uint64_t window_rows_;
  TsvStream stream_;
  bool window_end_due_ = false;
  uint64_t windows_ended_ = 0;
  uint64_t window_lines_ = 0;  // lines of the current window so far, every rank's
  uint64_t padding_due_ = 0;   // empty batches owed before the window end
};

}  // namespace

LOOM_PLUGIN("criteo_tsv", "0.1.0", loom::component<CriteoTsv>())
