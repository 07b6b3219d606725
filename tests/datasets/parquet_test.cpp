// parquet_test.cpp: the `parquet` dataset loaded as the host loads it, on tables the originals
// wrote (pyarrow's Parquet writer in FineWeb's layout, Hugging Face datasets' save_to_disk) and
// against Hugging Face tokenizers' ids for the same rows (parquet_reference.py): the token stream
// of each rank is its row groups' documents, tokenized as tokenizers does and joined with the
// end-of-text id; ranks read disjoint row groups that together cover the corpus; a resume inside
// a row group (and across epochs) gives exactly the batches that followed; bad files are named.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include <sys/stat.h>

#include "abi/compute_components.hpp"
#include "plugin_dataset.hpp"
#include "tokenizer_files.hpp"

using namespace loom_test;
using nlohmann::json;

namespace {

constexpr int64_t kT = 32, kB = 4;

struct Corpus {
  fs::path dir;
  json reference;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus out;
    out.dir = fs::path(LOOM_TEST_TMP) / "parquet-corpus";
    fs::remove_all(out.dir);
    const auto r = run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/tests/datasets/parquet_reference.py write " +
                             out.dir.string() + " --tokenizer " + tokenizer_dir("qwen3"));
    REQUIRE_MESSAGE(r.code == 0, r.err);
    std::ifstream in(out.dir / "reference.json");
    out.reference = json::parse(in);
    return out;
  }();
  return c;
}

// The token stream of the parts at `units` (indices into the files' parts in corpus order): each
// document's ids, then the separator (text), or the input_ids rows as they are.
std::vector<int64_t> stream_of(const std::vector<std::string>& files, const std::vector<size_t>& units, bool text) {
  const json& ref = corpus().reference;
  std::vector<std::pair<std::string, size_t>> all;
  for (const auto& f : files)
    for (size_t p = 0; p < ref["parts"][f].size(); ++p) all.emplace_back(f, p);
  std::vector<int64_t> out;
  for (const size_t u : units) {
    const json& part = ref["parts"][all.at(u).first][all.at(u).second];
    for (const auto& doc : part[text ? "ids" : "input_ids"]) {
      for (const auto& id : doc) out.push_back(id.get<int64_t>());
      if (text) out.push_back(ref["eos_id"].get<int64_t>());
    }
  }
  return out;
}

std::vector<std::string> files_of(const char* key) {
  std::vector<std::string> out;
  for (const auto& f : corpus().reference[key]) out.push_back(f.get<std::string>());
  return out;
}

toml::table options(const std::string& path, bool shuffle, const std::string& column = "text") {
  return toml::table{{"path", path},       {"tokenizer", tokenizer_dir("qwen3")}, {"column", column}, {"seq_len", kT},
                     {"batch_size", kB},   {"shuffle", shuffle},                 {"threads", 2}};
}

// Checks that `n` batches of ds are the stride-T windows of `stream`, in order.
void expect_windows(PluginDataset& ds, const std::vector<int64_t>& stream, int n) {
  size_t start = 0;
  for (int b = 0; b < n; ++b) {
    const Rows r = ds.next();
    REQUIRE(r.B == kB);
    for (int64_t i = 0; i < kB; ++i, start += size_t(kT)) {
      REQUIRE(start + size_t(kT) < stream.size());
      const std::vector<int64_t> in(r.inputs.begin() + i * kT, r.inputs.begin() + (i + 1) * kT);
      const std::vector<int64_t> tg(r.targets.begin() + i * kT, r.targets.begin() + (i + 1) * kT);
      CHECK(in == std::vector<int64_t>(stream.begin() + long(start), stream.begin() + long(start) + kT));
      CHECK(tg == std::vector<int64_t>(stream.begin() + long(start) + 1, stream.begin() + long(start) + kT + 1));
    }
  }
}

std::vector<size_t> every(size_t first, size_t step, size_t count) {
  std::vector<size_t> out;
  for (size_t u = first; u < count; u += step) out.push_back(u);
  return out;
}

}  // namespace

TEST_CASE("parquet: a FineWeb-layout folder in file order is its documents as tokenizers encodes them, joined with EOS") {
  const auto files = files_of("parquet_files");
  PluginDataset ds("parquet", options((corpus().dir / "fineweb").string(), false));
  const auto stream = stream_of(files, every(0, 1, 12), true);
  expect_windows(ds, stream, int(stream.size() / (kT * kB)) - 1);
}

TEST_CASE("parquet: each of two ranks reads its own row groups, which together cover the corpus") {
  const auto files = files_of("parquet_files");
  std::set<std::vector<int64_t>> windows[2];
  for (int rank = 0; rank < 2; ++rank) {
    PluginDataset ds("parquet", options((corpus().dir / "fineweb").string(), false), {0, rank, 2});
    const auto stream = stream_of(files, every(size_t(rank), 2, 12), true);
    expect_windows(ds, stream, 6);
  }
}

TEST_CASE("parquet: datasets' save_to_disk folder and a token-id column") {
  const auto arrow = files_of("arrow_files");
  SUBCASE("the text column through the tokenizer") {
    PluginDataset ds("parquet", options((corpus().dir / "saved").string(), false));
    expect_windows(ds, stream_of(arrow, {0, 1}, true), 10);
  }
  SUBCASE("input_ids taken as they are, nothing between documents") {
    PluginDataset ds("parquet", options((corpus().dir / "fineweb").string(), false, "input_ids"));
    expect_windows(ds, stream_of(files_of("parquet_files"), every(0, 1, 12), false), 10);
  }
}

TEST_CASE("parquet: a resume inside a row group and past an epoch's end gives exactly the batches that followed") {
  const std::string path = (corpus().dir / "fineweb").string();
  for (int rank = 0; rank < 2; ++rank) {
    PluginDataset first("parquet", options(path, true), {7, rank, 2});
    const auto before = first.next(5);
    const std::string state = first.save();
    const auto after = first.next(60);  // a rank's epoch here is about 26 batches
    PluginDataset second("parquet", options(path, true), {7, rank, 2});
    REQUIRE(second.load(state) == "");
    for (size_t i = 0; i < after.size(); ++i) CHECK(second.next() == after[i]);
    PluginDataset fresh("parquet", options(path, true), {7, rank, 2});
    CHECK(fresh.next(5) == before);
    PluginDataset other_world("parquet", options(path, true), {7, 0, 1});
    CHECK(contains(other_world.load(state), "world size 2, this run has 1"));
    CHECK(contains(fresh.load("LOOMWINS"), "not a parquet dataset record"));
    CHECK(contains(fresh.load(state + "abcd"), "4 bytes after its end"));
    CHECK(contains(fresh.load(state.substr(0, 70)), "ends after 70 bytes"));
  }
}

namespace {

// The saved-world count of a parquet state record (plugins/datasets/parquet/stream_state.hpp):
// nonzero while the rank still reads what a run of another world size had left.
uint32_t saved_ranks_in(const std::string& state) {
  const auto u64 = [&](size_t at) { uint64_t v; std::memcpy(&v, state.data() + at, 8); return v; };
  const size_t after_carry = 48 + 32 + 4 * size_t(u64(48 + 24));
  uint32_t n;
  std::memcpy(&n, state.data() + after_carry, 4);
  return n;
}

}  // namespace

TEST_CASE("parquet: a resume at another world size reads what the saved ranks had left once, then epochs of its own") {
  // One window a batch, so that the windows of the prelude (what the saved ranks left) can be
  // told from those after it: a rank's saved record lists the saved ranks until its prelude ends.
  toml::table o = options((corpus().dir / "fineweb").string(), true, "input_ids");
  o.insert_or_assign("batch_size", 1);
  std::multiset<int64_t> left;  // epoch 0's tokens: every row group once
  for (const int64_t id : stream_of(files_of("parquet_files"), every(0, 1, 12), false)) left.insert(id);
  const auto take = [&](const Rows& r) {
    for (const int64_t id : r.inputs) {
      const auto at = left.find(id);
      REQUIRE_MESSAGE(at != left.end(), "token " << id << " read more often than epoch 0 holds it");
      left.erase(at);
    }
  };
  std::vector<std::string> states;
  std::vector<Rows> next_of_saved;
  for (int rank = 0; rank < 2; ++rank) {
    PluginDataset saved("parquet", o, {5, rank, 2});
    for (int w = 0; w < 13 + 9 * rank; ++w) take(saved.next());
    states.push_back(saved.save());
    next_of_saved.push_back(saved.next());
  }
  const std::string record = loom::saved_world_record(states);  // what the host hands each rank
  const std::multiset<int64_t> unread = left;
  for (const int world : {3, 1}) {
    CAPTURE(world);
    left = unread;
    std::string mid_prelude;
    for (int rank = 0; rank < world; ++rank) {
      PluginDataset resumed("parquet", o, {5, rank, world});
      REQUIRE(resumed.load(record) == "");
      for (int w = 0;; ++w) {
        REQUIRE(w < 400);
        const Rows r = resumed.next();
        if (w == 0 && rank < 2) CHECK(r == next_of_saved[size_t(rank)]);  // the block in progress continues
        const std::string now = resumed.save();
        if (saved_ranks_in(now) == 0) break;  // this window began epoch 1 (and may end the prelude's last carry)
        take(r);
        if (rank == 0 && w == 3) mid_prelude = now;
      }
    }
    // What no window read: the tokens after each block in progress and each rank's last carry.
    CHECK(left.size() <= size_t(2 + 2 * world) * size_t(kT + 1));

    // Inside the prelude, a resume on this world size is exact; on another it is refused.
    PluginDataset a("parquet", o, {5, 0, world}), b("parquet", o, {5, 0, world});
    REQUIRE(a.load(mid_prelude) == "");
    REQUIRE(b.load(record) == "");
    for (int w = 0; w < 4; ++w) b.next();
    for (int w = 0; w < 30; ++w) CHECK(a.next() == b.next());
    PluginDataset other("parquet", o, {5, 0, 2});
    CHECK(contains(other.load(loom::saved_world_record(std::vector<std::string>(size_t(world), mid_prelude))),
                   "was still reading its share of what a run of 2 ranks had left"));
  }
  PluginDataset d("parquet", o, {5, 0, 3}), untouched("parquet", o, {5, 0, 3});
  CHECK(contains(d.load(record.substr(0, record.size() - 1)), "saved positions of another world size are damaged"));
  CHECK(d.next() == untouched.next());  // a refused state changes nothing
}

TEST_CASE("parquet: the shuffle reorders row groups and windows, and an epoch reads every token once") {
  const auto files = files_of("parquet_files");
  const auto stream = stream_of(files, every(0, 1, 12), true);
  PluginDataset ds("parquet", options((corpus().dir / "fineweb").string(), true), {3, 0, 1});
  PluginDataset in_order("parquet", options((corpus().dir / "fineweb").string(), false), {3, 0, 1});
  CHECK(ds.next() != in_order.next());
  PluginDataset fresh("parquet", options((corpus().dir / "fineweb").string(), true), {3, 0, 1});
  // Windows' inputs are disjoint pieces of one token stream, so the inputs of the batches of one
  // epoch are the corpus's tokens less the tail that carries into the next epoch.
  std::multiset<int64_t> left(stream.begin(), stream.end());
  const size_t windows = (stream.size() - 1) / size_t(kT), batches = windows / size_t(kB) - 1;
  for (size_t b = 0; b < batches; ++b)
    for (const int64_t id : fresh.next().inputs) {
      const auto at = left.find(id);
      REQUIRE_MESSAGE(at != left.end(), "token " << id << " read more often than the corpus holds it");
      left.erase(at);
    }
  CHECK(left.size() < size_t(2 * kB + 1) * size_t(kT));
}

TEST_CASE("parquet: document_mask gives positions restarting after each end-of-text and a document id per document") {
  const int64_t eos = corpus().reference["eos_id"].get<int64_t>();
  toml::table o = options((corpus().dir / "fineweb").string(), true);
  o.insert_or_assign("document_mask", true);
  PluginDataset ds("parquet", o);
  PluginDataset plain("parquet", options((corpus().dir / "fineweb").string(), true));
  int ends = 0;
  for (int n = 0; n < 5; ++n) {
    const Rows r = ds.next();
    CHECK(r == plain.next());  // the same windows, with two fields more
    const auto& positions = r.fields.at("position_ids");
    const auto& documents = r.fields.at("document_ids");
    for (int64_t b = 0; b < r.B; ++b)
      for (int64_t t = 0; t < r.T; ++t) {
        const size_t k = size_t(b * r.T + t);
        const bool after_end = t > 0 && r.inputs[k - 1] == eos;
        ends += after_end;
        CHECK(positions[k] == (t == 0 || after_end ? 0 : positions[k - 1] + 1));
        CHECK(documents[k] == (t == 0 ? 0 : documents[k - 1] + (after_end ? 1 : 0)));
      }
  }
  CHECK(ends >= 5);  // about 70 tokens a document here: a few ends in 5 batches of 4 x 32
  toml::table ids = options((corpus().dir / "fineweb").string(), true, "input_ids");
  ids.insert_or_assign("document_mask", true);
  try {
    PluginDataset bad("parquet", ids);
    FAIL("document_mask without a separator was taken");
  } catch (const CreateError& e) {
    CHECK(contains(e.what(), "document_mask needs a separator"));
  }
}

TEST_CASE("parquet: bad files and options are refused naming the file, the column and the fix") {
  const fs::path dir = fs::path(LOOM_TEST_TMP) / "parquet-bad";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string good = files_of("parquet_files")[0];
  const auto refusal = [&](const toml::table& o) {
    try {
      PluginDataset ds("parquet", o);
    } catch (const CreateError& e) {
      CHECK(e.code == LOOM_STATUS_CODE_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    FAIL("create succeeded");
    return std::string();
  };
  SUBCASE("a truncated footer") {
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(dir / "cut.parquet", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
    const std::string m = refusal(options((dir / "cut.parquet").string(), false));
    CHECK(contains(m, "cut.parquet"));
  }
  SUBCASE("a missing column names the columns there are") {
    const std::string m = refusal(options(good, false, "content"));
    CHECK(contains(m, "no column \"content\" (its columns: text, id, token_count, input_ids)"));
  }
  SUBCASE("a column of the wrong type") {
    const std::string m = refusal(options(good, false, "token_count"));
    CHECK(contains(m, "column \"token_count\" holds int64, neither text"));
  }
  SUBCASE("a column of nulls") {
    const auto r = run_shell(std::string(LOOM_PYTHON) + " -c \"import pyarrow as pa, pyarrow.parquet as pq; "
                             "pq.write_table(pa.table({'text': pa.array([None] * 8, pa.string())}), '" +
                             (dir / "nulls.parquet").string() + "')\"");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string m = refusal(options((dir / "nulls.parquet").string(), false));
    CHECK(contains(m, "column \"text\" holds only nulls (8 rows)"));
  }
  SUBCASE("a FIFO is refused without blocking") {
    REQUIRE(::mkfifo((dir / "pipe.parquet").c_str(), 0600) == 0);
    const std::string m = refusal(options((dir / "pipe.parquet").string(), false));
    CHECK(contains(m, "not a regular file"));
  }
  SUBCASE("more ranks than row groups") {
    toml::table o = options((corpus().dir / "saved").string(), false);
    try {
      PluginDataset ds("parquet", o, {0, 0, 3});
      FAIL("create succeeded");
    } catch (const CreateError& e) {
      CHECK(contains(e.what(), "2 non-empty row group(s) or record batch(es) in 2 file(s), fewer than the 3 ranks"));
    }
  }
  SUBCASE("a DatasetDict folder names its splits") {
    fs::create_directories(dir / "dict" / "train");
    std::ofstream(dir / "dict" / "dataset_dict.json") << R"({"splits": ["train", "test"]})";
    const std::string m = refusal(options((dir / "dict").string(), false));
    CHECK(contains(m, "DatasetDict folder (splits: train, test)"));
  }
}

TEST_CASE("host data inspect: files, columns, rows, tokens per row and the manifest for a FineWeb-layout folder") {
  const std::string dir = (corpus().dir / "fineweb").string();
  const auto r = run_host("data inspect " + dir + " --tokenizer " + tokenizer_dir("qwen3") + " --rows 2");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(contains(r.out, dir + ": 2 file(s), 120 rows in 12 row groups or record batches"));
  CHECK(contains(r.out, "000_00000.parquet: Parquet, 60 rows, 6 row group(s)"));
  CHECK(contains(r.out, "input_ids"));
  CHECK(contains(r.out, "list<element: int32>"));
  CHECK(contains(r.out, "[1] text = Document 1."));
  // Tokens per row: the first row group of each file, as tokenizers counts them.
  const json& ref = corpus().reference;
  uint64_t rows = 0, tokens = 0;
  for (const auto& f : files_of("parquet_files"))
    for (const auto& doc : ref["parts"][f][0]["ids"]) ++rows, tokens += doc.size();
  char mean[64];
  std::snprintf(mean, sizeof mean, "(%llu rows read): mean %.1f", (unsigned long long)rows, double(tokens) / double(rows));
  CHECK_MESSAGE(contains(r.out, mean), r.out);
  CHECK(contains(r.out, "use = \"parquet\"\n  path = \"" + dir + "\"\n  column = \"text\""));

  const auto ids = run_host("data inspect " + dir + " --column input_ids");
  REQUIRE_MESSAGE(ids.code == 0, ids.err);
  CHECK(contains(ids.out, "column = \"input_ids\""));
  CHECK(!contains(ids.out, "tokenizer = "));

  const fs::path cut = fs::path(LOOM_TEST_TMP) / "inspect-cut.parquet";
  std::ifstream in(files_of("parquet_files")[0], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const auto bad = run_host("data inspect " + cut.string());
  CHECK(bad.code == 2);
  CHECK(line_count(bad.err) == 1);
  CHECK(contains(bad.err, "data inspect: " + cut.string()));
}

TEST_CASE("host: a parquet run saved by 2 ranks resumes on 1, which reads what they had left") {
  const fs::path dir = fs::path(LOOM_TEST_TMP) / "parquet-world";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path m = dir / "m.toml";
  std::ofstream(m) << "[run]\ndir = \"" << dir.string() << "\"\nname = \"pq\"\nsteps = 6\nlog_every = 1\nthreads = 1\n"
                   << "[model]\nuse = \"mlp_lm\"\nvocab_size = 151936\nn_embd = 8\ncontext = 2\nhidden = 16\n"
                   << "[data]\nuse = \"parquet\"\npath = \"" << (corpus().dir / "fineweb").string()
                   << "\"\ncolumn = \"input_ids\"\nseq_len = 32\nthreads = 1\nvocab_size = 151936\n"
                   << "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n[checkpoint]\nevery = 3\n[distributed]\ntimeout_s = 60\n";
  const auto two = run_host("launch --nproc-per-node 2 -- run " + m.string() + " --set data.batch_size=2");
  REQUIRE_MESSAGE(two.code == 0, two.err);
  const auto one = run_host("run " + m.string() + " --set data.batch_size=4 --set run.steps=9");
  REQUIRE_MESSAGE(one.code == 0, one.err);
  CHECK_MESSAGE(contains(one.err, "world size 2 -> 1; weights and optimizer state resharded, dataset parquet deals what "
                                  "the 2 saved positions had left"), one.err);
  CHECK_MESSAGE(contains(one.err, "parquet: resumed from the positions of 2 ranks: this rank first reads"), one.err);
  CHECK(fs::exists(dir / "pq" / "checkpoints" / "step-9"));
}
