// The real criteo_tsv plugin through its C vtable: the batch layout, window ends at file ends and
// every window_rows lines, the end of data after the last pass, two-rank sharding, exact resume
// from every position, and refusals (FIFOs, bad lines, bad options, garbage state).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "plugins/datasets/criteo_tsv/criteo_line.hpp"
#include "ctr_plugin.hpp"
#include "plugins/datasets/common/little_endian.hpp"
#include "run_host.hpp"

using namespace ctr_test;

namespace {

std::string hex(uint64_t v) {
  char s[20];
  std::snprintf(s, sizeof s, "%llx", (unsigned long long)v);
  return s;
}

// Line k of the test data (2 dense, 2 categorical): label k % 2; I1 = k, I2 empty when k % 4 == 0
// else -k; C1 = the id k + 1; C2 empty when k % 3 == 0, else ids 10k and 10k + 1.
std::string line_of(uint64_t k) {
  return std::to_string(k % 2) + "\t" + std::to_string(k) + "\t" + (k % 4 == 0 ? "" : "-" + std::to_string(k)) +
         "\t" + hex(k + 1) + "\t" + (k % 3 == 0 ? "" : hex(10 * k) + "," + hex(10 * k + 1)) + "\n";
}

// Files holding `counts` lines each, numbered on across files from `first`.
std::vector<std::string> write_files(const fs::path& dir, const std::vector<int>& counts, uint64_t first = 0) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < counts.size(); ++i) {
    const fs::path p = dir / ("part-" + std::to_string(i) + ".tsv");
    std::ofstream out(p, std::ios::binary);
    for (int j = 0; j < counts[i]; ++j) out << line_of(first++);
    paths.push_back(p.string());
  }
  return paths;
}

std::string joined(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& p : paths) out += (out.empty() ? "" : ",") + p;
  return out;
}

toml::table options(const std::vector<std::string>& files, int64_t batch_size, int64_t window_rows = 0,
                    int64_t passes = 1) {
  return toml::table{{"files", joined(files)},       {"batch_size", batch_size},   {"dense_features", 2},
                     {"sparse_features", 2},        {"table_rows", "1000003,97"}, {"window_rows", window_rows},
                     {"passes", passes}};
}

// The shape of the next n results: batch sizes, "|" for a window end, "." for the end of data.
std::string trace(CtrDataset& d, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    const CtrBatch b = d.next();
    out += (out.empty() ? "" : " ") + (b.kind == CtrBatch::batch ? std::to_string(b.B) : b.kind == CtrBatch::window_end ? "|" : ".");
  }
  return out;
}

std::string create_error(const toml::table& o, int32_t rank = 0, int32_t world = 1) {
  try {
    CtrDataset d(o, rank, world);
  } catch (const CreateError& e) {
    CHECK(e.code == LOOM_STATUS_CODE_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("criteo_tsv batches: stream indices, labels, log(1 + x) dense, feature-major CSR of hashed ids") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-layout");
  CtrDataset d(options(write_files(dir, {5}), 3));
  CHECK(d.batches_per_epoch() == 0);
  const CtrBatch b = d.next();
  REQUIRE(b.kind == CtrBatch::batch);
  REQUIRE(b.B == 3);
  CHECK(b.inputs == std::vector<int64_t>{0, 1, 2});
  CHECK(b.targets == std::vector<int64_t>{0, 1, 0});
  CHECK(b.dense_shape == std::vector<int64_t>{3, 2});
  CHECK(b.dense == std::vector<float>{0, 0, float(std::log1p(1.0)), 0, float(std::log1p(2.0)), 0});
  using loom::criteo::hashed_row;
  // Feature C1 of samples 0, 1, 2, then C2 (empty for line 0, two ids for lines 1 and 2).
  CHECK(b.offsets == std::vector<int64_t>{0, 1, 2, 3, 3, 5, 7});
  CHECK(b.values == std::vector<int64_t>{hashed_row(1, 0, 1000003), hashed_row(2, 0, 1000003), hashed_row(3, 0, 1000003),
                                         hashed_row(10, 1, 97), hashed_row(11, 1, 97), hashed_row(20, 1, 97),
                                         hashed_row(21, 1, 97)});
  const CtrBatch last = d.next();  // the window's last batch is smaller
  CHECK(last.B == 2);
  CHECK(last.inputs == std::vector<int64_t>{3, 4});
  CHECK(last.offsets == std::vector<int64_t>{0, 1, 2, 2, 4});
  CHECK(trace(d, 4) == "| . . .");  // passes = 1: the data ends and stays ended
}

TEST_CASE("criteo_tsv windows: each file by default (an empty file too), or every window_rows lines within a pass") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-windows");
  const std::vector<std::string> files = write_files(dir, {4, 0, 5});
  {
    CtrDataset d(options(files, 2));
    CHECK(trace(d, 10) == "2 2 | | 2 2 1 | . .");
  }
  {
    CtrDataset d(options(files, 2, 3));  // lines 0-2, 3-5 (across the empty file), 6-8
    CHECK(trace(d, 11) == "2 1 | 2 1 | 2 1 | . .");
  }
  {
    CtrDataset d(options(files, 2, 4, 2));  // the pass's end closes the partial window 8
    CHECK(trace(d, 17) == "2 2 | 2 2 | 1 | 2 2 | 2 2 | 1 | .");
  }
  {
    CtrDataset d(options(files, 4, 4, 2));  // a full batch that ends its window: the end comes next call
    std::vector<int64_t> seen;
    std::string shape;
    for (int i = 0; i < 9; ++i) {
      const CtrBatch b = d.next();
      shape += b.kind == CtrBatch::batch ? "b" : b.kind == CtrBatch::window_end ? "|" : ".";
      seen.insert(seen.end(), b.inputs.begin(), b.inputs.end());
    }
    CHECK(shape == "b|b|b|b|b");  // 4 | 4 | 1 |, then pass 2: 4 | 4
    CHECK(seen == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5, 6, 7});  // indices restart each pass
  }
  {
    CtrDataset d(options(files, 5, 0, 0));  // endless
    const std::string one_pass = "4 | | 5 |";
    CHECK(trace(d, 25) == one_pass + " " + one_pass + " " + one_pass + " " + one_pass + " 4 | | 5 |");
  }
}

TEST_CASE("criteo_tsv on two ranks: line j of a window goes to rank j % 2; together they see every line once") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-ranks");
  const std::vector<std::string> files = write_files(dir, {7, 1, 6});
  for (int64_t window_rows : {0, 5}) {
    std::vector<int64_t> single;
    CtrDataset one(options(files, 2, window_rows));
    for (CtrBatch b = one.next(); b.kind != CtrBatch::data_end; b = one.next())
      single.insert(single.end(), b.inputs.begin(), b.inputs.end());
    CHECK(single.size() == 14);
    std::multiset<int64_t> both;
    int windows[2] = {0, 0};
    for (int32_t rank : {0, 1}) {
      CtrDataset d(options(files, 2, window_rows), rank, 2);
      for (CtrBatch b = d.next(); b.kind != CtrBatch::data_end; b = d.next()) {
        windows[rank] += b.kind == CtrBatch::window_end;
        for (size_t i = 0; i < b.inputs.size(); ++i) {
          both.insert(b.inputs[i]);
          CHECK(b.targets[i] == b.inputs[i] % 2);  // the label of line k is k % 2
        }
      }
    }
    CHECK(windows[0] == windows[1]);  // every rank sees every window end
    CHECK(both == std::multiset<int64_t>(single.begin(), single.end()));
  }
  // Per file: rank 1 gets lines 1, 3, 5 of file 0 and nothing of the one-line file, where it
  // gives an empty batch so that both ranks end that window after one batch.
  CtrDataset r1(options(files, 2), 1, 2);
  CHECK(r1.next().inputs == std::vector<int64_t>{1, 3});
  CHECK(r1.next().inputs == std::vector<int64_t>{5});
  CHECK(trace(r1, 5) == "| 0 | 2 1");
  CtrDataset r0(options(files, 2), 0, 2);
  CHECK(trace(r0, 9) == "2 2 | 1 | 2 1 | .");
}

TEST_CASE("criteo_tsv on 1 to 4 ranks: every rank gives each window as many batches, so window ends line up") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-aligned");
  const std::vector<std::string> files = write_files(dir, {7, 1, 6, 0, 9});
  for (int32_t world : {1, 2, 3, 4})
    for (int64_t batch : {1, 2, 3})
      for (int64_t window_rows : {0, 4}) {
        CAPTURE(world);
        CAPTURE(batch);
        CAPTURE(window_rows);
        std::vector<std::string> traces;
        for (int32_t rank = 0; rank < world; ++rank) {
          CtrDataset d(options(files, batch, window_rows), rank, world);
          std::string shape;  // one '.' per batch, '|' per window end
          for (CtrBatch b = d.next(); b.kind != CtrBatch::data_end; b = d.next()) shape += b.kind == CtrBatch::batch ? "." : "|";
          traces.push_back(shape);
        }
        for (const std::string& t : traces) CHECK(t == traces.front());
      }
}

TEST_CASE("criteo_tsv resumes exactly: a fresh instance loading the state saved after k results continues the same") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-resume");
  const std::vector<std::string> files = write_files(dir, {5, 0, 4, 3});
  for (int64_t window_rows : {0, 3}) {
    for (int32_t rank : {0, 1}) {
      const toml::table o = options(files, 2, window_rows, 2);
      std::vector<CtrBatch> full;
      std::vector<std::string> states;
      {
        CtrDataset d(o, rank, 2);
        for (int i = 0; i < 40; ++i) {
          states.push_back(d.save());
          full.push_back(d.next());
        }
        REQUIRE(full.back().kind == CtrBatch::data_end);
      }
      for (size_t k = 0; k < full.size(); k += 1) {
        CtrDataset fresh(o, rank, 2);
        fresh.next();  // move it somewhere else first: the load must replace the position
        REQUIRE(fresh.load(states[k]) == "");
        for (size_t i = k; i < std::min(full.size(), k + 6); ++i)
          REQUIRE_MESSAGE(fresh.next() == full[i], "window_rows " << window_rows << ", rank " << rank << ", state "
                                                                  << k << ", result " << i);
      }
    }
  }
}

TEST_CASE("criteo_tsv refuses a FIFO without blocking, a missing file, an empty data set and bad options") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-refuse");
  const std::vector<std::string> files = write_files(dir, {3});
  const std::string fifo = (dir / "pipe.tsv").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(create_error(options({files[0], fifo}, 2)) ==
        fifo + ": is a FIFO (named pipe), not a regular file; `files` takes TSV files, or one directory alone");
  CHECK(create_error(options({files[0], dir.string()}, 2)) ==
        dir.string() + ": is a directory, not a regular file; `files` takes TSV files, or one directory alone");
  CHECK(create_error(options({(dir / "none.tsv").string()}, 2)) ==
        (dir / "none.tsv").string() + ": no such file; check `files`");
  std::ofstream(dir / "empty.tsv").close();
  CHECK(create_error(options({(dir / "empty.tsv").string()}, 2)) ==
        "criteo_tsv: the 1 file(s) of `files` are empty; point it at Criteo TSV data");

  toml::table o = options(files, 0);
  CHECK(create_error(o) == "criteo_tsv: batch_size must be from 1 to 1048576, got 0");
  o = options(files, 2);
  o.insert_or_assign("table_rows", "5,6,7");
  CHECK(create_error(o) == "criteo_tsv: table_rows lists 3 row counts but sparse_features = 2; give one count for all "
                           "features or exactly one per feature");
  o.insert_or_assign("table_rows", "5,0");
  CHECK(create_error(o) == "criteo_tsv: table_rows entry \"0\" is not a positive integer; write one row count, or one "
                           "per categorical feature separated by ','");
  o = options(files, 2, -1);
  CHECK(create_error(o) == "criteo_tsv: window_rows must be from 0 to 9223372036854775807, got -1");
}

TEST_CASE("criteo_tsv reads a directory's *.tsv files by name, and a bad or overlong line fails next with file:line") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-dir");
  write_files(dir, {2, 2});  // part-0.tsv, part-1.tsv
  std::ofstream(dir / "notes.txt") << "not data\n";
  toml::table o = options({dir.string()}, 10);
  {
    CtrDataset d(o);
    CHECK(d.next().inputs == std::vector<int64_t>{0, 1});
    CHECK(d.next().kind == CtrBatch::window_end);
    CHECK(d.next().inputs == std::vector<int64_t>{2, 3});
  }
  std::ofstream(dir / "part-1.tsv", std::ios::app) << "1\t2\t3\tabc\n" << std::string(loom::criteo::kMaxLineBytes + 1, 'x');
  {
    CtrDataset d(o);
    d.next();
    d.next();
    std::string error;
    d.next(&error);
    CHECK(error == (dir / "part-1.tsv").string() +
                       ":3: 4 tab-separated columns, expected 5 (label, 2 dense, 2 categorical); set dense_features "
                       "and sparse_features to the file's layout");
  }
  o.insert_or_assign("window_rows", 3);  // skip line 3 (rank 0 of 2 never parses it), meet the long line 4
  {
    CtrDataset d(o, 0, 2);
    d.next();
    d.next();
    std::string error;
    d.next(&error);
    CHECK(error == (dir / "part-1.tsv").string() +
                       ":4: the line is longer than 1 MiB (1048576 bytes); Criteo lines are a few hundred bytes, so "
                       "this is not a Criteo TSV file or its lines lack newlines");
  }
}

TEST_CASE("criteo_tsv: after whole batches every rank saves the same state, which other rank counts resume") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-any-world");
  const std::vector<std::string> files = write_files(dir, {5, 0, 4, 3, 7});
  // The lines every rank of `world` reads from `state` on, with batch_size `batch`.
  const auto lines_after = [&](int64_t window_rows, int32_t world, int64_t batch, const std::string& state) {
    std::multiset<int64_t> lines;
    for (int32_t rank = 0; rank < world; ++rank) {
      CtrDataset d(options(files, batch, window_rows), rank, world);
      REQUIRE(d.load(state) == "");
      for (CtrBatch b = d.next(); b.kind != CtrBatch::data_end; b = d.next()) lines.insert(b.inputs.begin(), b.inputs.end());
    }
    return lines;
  };
  for (int64_t window_rows : {0, 4, 6}) {
    CAPTURE(window_rows);
    int shared = 0, inside = 0;
    CtrDataset r0(options(files, 2, window_rows), 0, 2), r1(options(files, 2, window_rows), 1, 2);
    for (CtrBatch b = r0.next(); b.kind != CtrBatch::data_end; b = r0.next()) {
      REQUIRE(r1.next().kind == b.kind);
      const std::string state = r0.save();
      if (state != r1.save()) continue;  // a window's end, or a file ending inside a round
      ++shared;
      inside += b.kind == CtrBatch::batch;
      // 4 ranks of 1 and 1 rank of 4 (the same 4 lines a step) go on with the same lines.
      const auto expected = lines_after(window_rows, 2, 2, state);
      CHECK(lines_after(window_rows, 4, 1, state) == expected);
      CHECK(lines_after(window_rows, 1, 4, state) == expected);
    }
    CHECK(inside >= 2);  // shared inside windows too, not only between them
    CHECK(shared > inside);
  }
  // 3 ranks cannot have read 4 lines in whole batches: refused, naming the fix.
  CtrDataset r0(options(files, 2, 4), 0, 2), r1(options(files, 2, 4), 1, 2);
  r0.next();
  r1.next();
  REQUIRE(r0.save() == r1.save());
  CHECK(CtrDataset(options(files, 1, 4), 0, 3).load(r0.save()) ==
        "criteo_tsv: the saved dataset state is 4 lines into its window, which 3 ranks with batch_size 1 cannot have "
        "read in whole batches; keep the global batch (ranks x batch_size) of the run that wrote it");
}

TEST_CASE("criteo_tsv load_state refuses garbage and states that do not fit this run or these files") {
  const fs::path dir = loom_test::tmp_dir("ctr-plugin-state");
  const std::vector<std::string> files = write_files(dir, {4, 4});
  CtrDataset d(options(files, 2, 3, 2));
  d.next();
  const std::string good = d.save();  // a position every rank shares: rank 0, world size 0, batch_size 0
  REQUIRE(good.size() == 112);
  const auto patch = [](std::string s, size_t at, uint64_t value, size_t bytes = 8) {
    std::string le;
    loom::data::append_le<uint64_t>(le, value);
    s.replace(at, bytes, le.substr(0, bytes));
    return s;
  };
  const auto with = [&](size_t at, uint64_t value, size_t bytes = 8) { return patch(good, at, value, bytes); };
  // The same position as one rank's own record: world size 1 (at 16), batch_size 2 (at 24).
  const std::string own = patch(patch(good, 16, 1, 4), 24, 2);
  CHECK(d.load(own) == "");
  const auto own_with = [&](size_t at, uint64_t value, size_t bytes = 8) { return patch(own, at, value, bytes); };
  const std::string fresh = "; resume with the data and options that wrote the checkpoint, or start a fresh run";
  CHECK(d.load("") == "criteo_tsv: the saved dataset state is not a criteo_tsv record (0 bytes, expected 112 starting "
                      "with \"LOOMCTRS\")" + fresh);
  CHECK(d.load(std::string(112, '\xff')).find("is not a criteo_tsv record (112 bytes") != std::string::npos);
  CHECK(d.load(good.substr(0, 111)).find("(111 bytes, expected 112") != std::string::npos);
  // padding_due at 104: at most one empty batch, owed only before a window end.
  CHECK(d.load(own_with(104, 1)) == "criteo_tsv: the saved dataset state owes 1 empty batches inside a window, which no "
                                "window gives; resume from another checkpoint or start a fresh run");
  CHECK(d.load(own_with(104, 5)).find("owes 5 empty batches") != std::string::npos);
  CHECK(d.load(with(8, 2, 4)) == "criteo_tsv: the saved dataset state has version 2, this build reads version 1" + fresh);
  CHECK(d.load(own_with(12, 1, 4)) == "criteo_tsv: the saved dataset state was written with rank 1 but this run has 0; "
                                  "each rank must load its own state");
  CHECK(d.load(own_with(16, 4, 4)) == "criteo_tsv: the saved dataset state was written with world size 4 but this run has 1; "
                                  "resume on the same number of ranks (this position, at a window's end that the "
                                  "ranks' batches did not fill alike, is one rank's own; a checkpoint of another step "
                                  "resumes at any rank count)");
  // World size 0 marks a position every rank shared; this one holds a rank's batch_size.
  CHECK(d.load(with(24, 2)) == "criteo_tsv: the saved dataset state is marked as shared by every rank but holds "
                                  "one rank's values; resume from another checkpoint or start a fresh run");
  CHECK(d.load(with(20, 7, 4)) == "criteo_tsv: the saved dataset state has a window flag of 7" + fresh);
  CHECK(d.load(own_with(24, 8)) == "criteo_tsv: the saved dataset state was written with batch_size 8 but this run has 2; "
                               "set the same [data] batch_size");
  CHECK(d.load(with(40, 3)) == "criteo_tsv: the saved dataset state was written with a file count of 3 but this run "
                               "has 2; restore the files the run was reading");
  // Position fields: pass 48, file 56, offset 64, line_in_file 72, line_in_pass 80, line_in_window 88.
  CHECK(d.load(with(48, 3)) == "criteo_tsv: the saved dataset state is in pass 4 but passes = 2" + fresh);
  CHECK(d.load(with(56, 5)) == "criteo_tsv: the saved dataset state names file 6 of 2" + fresh);
  CHECK(d.load(with(64, 5)) == "criteo_tsv: the saved dataset state points at byte 5 of " + files[0] +
                                   ", which is not the start of a line" + fresh);
  CHECK(d.load(with(64, 1u << 20)) == "criteo_tsv: the saved dataset state points at byte 1048576 of " + files[0] +
                                          ", which has " + std::to_string(fs::file_size(files[0])) + fresh);
  CHECK(d.load(with(72, 200)) ==
        "criteo_tsv: the saved dataset state holds line counts that do not match its byte offset" + fresh);
  CHECK(d.load(with(88, 4)) == "criteo_tsv: the saved dataset state holds 4 lines in its window, which window_rows = "
                               "3 cannot give" + fresh);
  // A file cut short since the checkpoint.
  {
    std::ofstream(files[0], std::ios::trunc) << line_of(0);
    CHECK(d.load(good).find("criteo_tsv: the saved dataset state points at byte ") == 0);
  }
  write_files(dir, {4, 4});
  CHECK(d.load(good) == "");
  CHECK(d.next().inputs == std::vector<int64_t>{2});  // window 0-2: line 2 ends it
}
