// sft_test.cpp: the `sft` dataset loaded as the host loads it, with the real Qwen3 tokenizer and
// chat template: every sample's ids and trained tokens equal what transformers and Hugging Face's
// tokenizers give (sft_reference.py); packed rows keep samples whole and apart (positions
// restart, documents differ) and reach 95% non-pad; ranks share no sample; resume is exact; the
// cache is reused; bad lines are named or skipped as configured.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include <sys/stat.h>

#include "plugin_dataset.hpp"
#include "tokenizer_files.hpp"

using namespace loom_test;
using nlohmann::json;

namespace {

constexpr int64_t kIgnore = -100;

// Arithmetic and string tasks with checkable answers; one, two or three turns, some with a system prompt.
std::string write_data(const fs::path& dir, int samples, int max_turns = 1) {
  fs::create_directories(dir);
  const fs::path file = dir / "train.jsonl";
  std::ofstream out(file);
  for (int i = 0; i < samples; ++i) {
    json messages = json::array();
    if (i % 3 == 0) messages.push_back({{"role", "system"}, {"content", "Answer with the result only."}});
    const int turns = 1 + i % max_turns;
    for (int t = 0; t < turns; ++t) {
      const int a = i + t * 1000, b = (i * 11 + t * 3) % 100;  // a names the sample: no two are alike
      if ((i + t) % 2 == 0) {
        messages.push_back({{"role", "user"}, {"content", "What is " + std::to_string(a) + " + " + std::to_string(b) + "?"}});
        messages.push_back({{"role", "assistant"}, {"content", std::to_string(a + b)}});
      } else {
        const std::string word = std::string("loom") + std::to_string(a) + "abc";
        messages.push_back({{"role", "user"}, {"content", "Reverse the word " + word}});
        messages.push_back({{"role", "assistant"}, {"content", std::string(word.rbegin(), word.rend())}});
      }
    }
    out << json{{"messages", messages}}.dump() << "\n";
  }
  return file.string();
}

struct Sample {
  std::vector<int64_t> ids;
  std::vector<int> trained;
  bool operator<(const Sample& o) const { return std::tie(ids, trained) < std::tie(o.ids, o.trained); }
  bool operator==(const Sample& o) const { return ids == o.ids && trained == o.trained; }
};

std::vector<Sample> reference_samples(const std::string& data, const std::string& mode = "") {
  const fs::path out = fs::path(data).parent_path() / "reference.json";
  const auto r = run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/tests/datasets/sft_reference.py " +
                           tokenizer_dir("qwen3") + " " + data + " " + out.string() + " " + mode);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::vector<Sample> samples;
  for (const auto& s : json::parse(read_file(out))) samples.push_back({s["ids"].get<std::vector<int64_t>>(), s["trained"].get<std::vector<int>>()});
  return samples;
}

toml::table options(const std::string& data, const fs::path& cache, bool packing, int64_t seq_len = 128, int64_t batch = 2) {
  return toml::table{{"files", data},          {"tokenizer", tokenizer_dir("qwen3")}, {"cache_dir", cache.string()},
                     {"packing", packing},     {"seq_len", seq_len},             {"batch_size", batch},
                     {"threads", 2}};
}

// The samples a batch's rows hold, rebuilt from inputs, labels and the packing fields: a
// sample's ids are its inputs plus its last label; its trained flags are where labels are set.
std::vector<Sample> samples_of(const Rows& rows) {
  std::vector<Sample> out;
  const auto& docs = rows.fields.at("document_ids");
  const auto& positions = rows.fields.at("position_ids");
  const auto& mask = rows.fields.at("attention_mask");
  for (int64_t b = 0; b < rows.B; ++b) {
    for (int64_t t = 0; t < rows.T; ++t) {
      const size_t k = size_t(b * rows.T + t);
      if (!mask[k]) continue;
      if (positions[k] == 0) {
        CHECK((t == 0 || docs[k] != docs[k - 1]));  // a new sample starts a new document
        out.push_back({{rows.inputs[k]}, {0}});
      } else {
        CHECK(docs[k] == docs[k - 1]);
        CHECK(positions[k] == positions[k - 1] + 1);
        out.back().ids.push_back(rows.inputs[k]);
      }
      const bool last = t + 1 == rows.T || !mask[k + 1] || positions[k + 1] == 0;
      const bool labelled = rows.targets[k] != kIgnore;
      if (!last) {
        if (labelled) CHECK(rows.targets[k] == rows.inputs[k + 1]);
        out.back().trained.push_back(labelled);
      } else {
        REQUIRE_MESSAGE(labelled, "the last token of a sample is an answer's end, so it is trained");
        out.back().ids.push_back(rows.targets[k]);
        out.back().trained.push_back(1);
      }
    }
  }
  return out;
}

std::vector<Sample> one_epoch(PluginDataset& data, double* nonpad = nullptr) {
  std::vector<Sample> out;
  int64_t used = 0, all = 0;
  for (Rows r = data.next(); r.B > 0; r = data.next()) {
    for (const auto& s : samples_of(r)) out.push_back(s);
    for (auto m : r.fields.at("attention_mask")) used += m;
    all += r.B * r.T;
  }
  if (nonpad) *nonpad = double(used) / double(all);
  return out;
}


// Every sample of an epoch (but what the last, partial batch drops) is one of the reference's.
void check_against_reference(const std::string& data, const toml::table& opts, const std::string& mode) {
  std::vector<Sample> want = reference_samples(data, mode);
  for (auto& s : want) s.trained[0] = 0;  // token 0 is never a label: nothing precedes it
  std::sort(want.begin(), want.end());
  PluginDataset sft("sft", opts);
  const std::vector<Sample> got = one_epoch(sft);
  CHECK(got.size() * 10 >= want.size() * 9);  // the rows that do not fill a last batch are dropped
  size_t found = 0;
  for (const auto& s : got) found += std::binary_search(want.begin(), want.end(), s);
  CHECK(found == got.size());
  MESSAGE(found << "/" << got.size() << " samples equal to the references' (of " << want.size() << ")");
}

}  // namespace

TEST_CASE("sft: each sample's ids and trained tokens are the references' (Qwen3 template and tokens, as transformers gives them)") {
  const auto dir = tmp_dir("sft_reference");
  const std::string data = write_data(dir, 60);
  for (const bool packing : {false, true}) {
    CAPTURE(packing);
    check_against_reference(data, options(data, dir / "cache", packing), "");
  }
}

TEST_CASE("sft: multi-turn Qwen3 data trains its last answer (last_assistant); train_on = assistant says why it cannot") {
  const auto dir = tmp_dir("sft_multi_turn");
  const std::string data = write_data(dir, 60, 3);
  auto opts = options(data, dir / "cache", true, 256);
  opts.insert_or_assign("train_on", "last_assistant");
  check_against_reference(data, opts, "last");
  try {
    PluginDataset sft("sft", options(data, dir / "cache", true, 256));
    FAIL("Qwen3's template renders an earlier answer differently once later turns follow");
  } catch (const CreateError& e) {
    CHECK(std::string(e.what()).find("train.jsonl line 2: the chat template renders turn 1 differently") != std::string::npos);
    CHECK(std::string(e.what()).find("use train_on = \"last_assistant\"") != std::string::npos);
  }
}

TEST_CASE("sft: packing keeps samples whole and apart and fills over 95% of the positions") {
  const auto dir = tmp_dir("sft_packing");
  const std::string data = write_data(dir, 400);
  double nonpad_packed = 0, nonpad_padded = 0;
  PluginDataset packed("sft", options(data, dir / "cache", true, 256, 4));
  const auto a = one_epoch(packed, &nonpad_packed);
  PluginDataset padded("sft", options(data, dir / "cache", false, 256, 4));
  const auto b = one_epoch(padded, &nonpad_padded);
  MESSAGE("non-pad fraction: packed " << nonpad_packed << ", padded " << nonpad_padded);
  CHECK(nonpad_packed >= 0.95);
  CHECK(nonpad_padded < 0.5);
  std::multiset<Sample> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  size_t common = 0;
  for (const auto& s : sa) common += sb.count(s) > 0;
  CHECK(common >= std::min(sa.size(), sb.size()) - 4);
}

TEST_CASE("sft: two ranks share no sample and together hold what one rank holds; resume is exact") {
  const auto dir = tmp_dir("sft_ranks");
  const std::string data = write_data(dir, 200);
  PluginDataset r0("sft", options(data, dir / "cache", true), {7, 0, 2});
  PluginDataset r1("sft", options(data, dir / "cache", true), {7, 1, 2});
  const auto a = one_epoch(r0), b = one_epoch(r1);
  std::set<Sample> sa(a.begin(), a.end());
  for (const auto& s : b) CHECK(sa.count(s) == 0);

  PluginDataset first("sft", options(data, dir / "cache", true), {7, 0, 1});
  for (int i = 0; i < 5; ++i) first.next();
  const std::string state = first.save();
  std::vector<Rows> expected;
  for (int i = 0; i < 40; ++i) expected.push_back(first.next());  // runs past the epoch's end
  PluginDataset resumed("sft", options(data, dir / "cache", true), {7, 0, 1});
  REQUIRE(resumed.load(state) == "");
  for (int i = 0; i < 40; ++i) {
    const Rows r = resumed.next();
    CHECK(r == expected[size_t(i)]);
    if (r.B > 0) CHECK(r.fields == expected[size_t(i)].fields);
  }
}

TEST_CASE("sft: the second run reads the tokenization cache; another template makes another cache") {
  const auto dir = tmp_dir("sft_cache");
  const std::string data = write_data(dir, 30);
  { PluginDataset first("sft", options(data, dir / "cache", true)); }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "cache")) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  const auto written = fs::last_write_time(files[0]);
  { PluginDataset second("sft", options(data, dir / "cache", true)); }
  CHECK(fs::last_write_time(files[0]) == written);
  auto other = options(data, dir / "cache", true);
  other.insert_or_assign("chat_template", "chatml");
  { PluginDataset third("sft", other); }
  size_t count = 0;
  for (const auto& e : fs::directory_iterator(dir / "cache")) count += e.path().extension() == ".sft";
  CHECK(count == 2);
}

TEST_CASE("sft: a bad line is named with file and line, or skipped and counted; bad options are refused") {
  const auto dir = tmp_dir("sft_bad");
  fs::create_directories(dir);
  std::ofstream(dir / "bad.jsonl") << R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})"
                                   << "\n{broken\n"
                                   << R"({"prompt": "p", "completion": "c"})" << "\n";
  const std::string data = (dir / "bad.jsonl").string();
  try {
    PluginDataset sft("sft", options(data, dir / "cache", true, 64, 1));
    FAIL("a broken line must stop the run");
  } catch (const CreateError& e) {
    CHECK(e.code == LOOM_STATUS_CODE_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("bad.jsonl line 2: not valid JSON") != std::string::npos);
  }
  // A number too large for a double is nlohmann's other parse refusal (out_of_range, not parse_error).
  std::ofstream(dir / "huge.jsonl") << R"({"prompt": "p", "completion": "c"})" << "\n"
                                    << R"({"prompt": "p", "completion": "c", "weight": 1e99999})" << "\n";
  try {
    PluginDataset sft("sft", options((dir / "huge.jsonl").string(), dir / "cache", true, 64, 1));
    FAIL("a number out of range must stop the run");
  } catch (const CreateError& e) {
    CHECK(e.code == LOOM_STATUS_CODE_INVALID_ARGUMENT);
    CHECK_MESSAGE(std::string(e.what()).find("huge.jsonl line 2: not JSON Loom can read") != std::string::npos, e.what());
  }
  auto skip = options(data, dir / "cache", true, 64, 1);
  skip.insert_or_assign("on_bad_line", "skip");
  PluginDataset sft("sft", skip);
  CHECK(sft.next().B == 1);
  for (const auto& [key, value, expect] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"train_on", "everything", "train_on must be assistant, last_assistant or all"},
           {"chat_template", "no-such-template", "is neither a built-in name"},
           {"format", "csv", "format must be one of"},
           {"files", (dir / "missing.jsonl").string(), "does not exist"}}) {
    auto bad = options(data, dir / "cache", true, 64, 1);
    bad.insert_or_assign("on_bad_line", "skip");
    bad.insert_or_assign(key, value);
    try {
      PluginDataset d("sft", bad);
      FAIL("refused: " << key);
    } catch (const CreateError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(expect) != std::string::npos, e.what());
    }
  }
}

TEST_CASE("sft: a damaged cache is tokenized again; a FIFO among the files is refused, never read") {
  const auto dir = tmp_dir("sft_damaged");
  const std::string data = write_data(dir, 30);
  std::vector<Rows> first;
  {
    PluginDataset sft("sft", options(data, dir / "cache", true));
    for (int i = 0; i < 3; ++i) first.push_back(sft.next());
  }
  fs::path cache;
  for (const auto& e : fs::directory_iterator(dir / "cache")) cache = e.path();
  const std::string whole = read_file(cache);
  for (const size_t at : {size_t(20), whole.size() / 2, whole.size() - 3}) {  // a count, an id or a flag, the checksum
    std::string damaged = whole;
    damaged[at] = char(damaged[at] ^ 0x5A);
    std::ofstream(cache, std::ios::binary) << damaged;
    PluginDataset sft("sft", options(data, dir / "cache", true));
    for (int i = 0; i < 3; ++i) CHECK(sft.next() == first[size_t(i)]);
    CHECK(read_file(cache) == whole);  // rewritten whole
  }
  const fs::path fifo = dir / "fifo.jsonl";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  try {
    PluginDataset sft("sft", options(fifo.string(), dir / "cache", true));
    FAIL("a FIFO must be refused");
  } catch (const CreateError& e) {
    CHECK(std::string(e.what()).find("is not a regular file") != std::string::npos);
  }
}

TEST_CASE("sft: 20 files of mutated lines load or are refused in one line, never crash") {
  const auto dir = tmp_dir("sft_fuzz");
  const std::string clean = read_file(write_data(dir, 40, 2));
  std::mt19937_64 rng(17);
  int loaded = 0, refused = 0;
  for (int f = 0; f < 20; ++f) {
    std::string text = clean;
    for (int m = 0; m < 40; ++m) {  // flips, cuts and stray JSON punctuation
      const size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0: text[at] = char(rng() % 256); break;
        case 1: text.erase(at, rng() % 12); break;
        case 2: text.insert(at, 1, "{}[]\":,\\"[rng() % 8]); break;
        default: text.insert(at, "\xF0\x9F\x98"); break;  // a cut UTF-8 sequence
      }
    }
    const fs::path file = dir / ("mutated" + std::to_string(f) + ".jsonl");
    std::ofstream(file, std::ios::binary) << text;
    auto opts = options(file.string(), dir / "cache", true, 256, 1);
    opts.insert_or_assign("on_bad_line", f % 2 ? "skip" : "error");
    try {
      PluginDataset sft("sft", opts);
      sft.next();
      ++loaded;
    } catch (const CreateError& e) {
      CHECK(e.code == LOOM_STATUS_CODE_INVALID_ARGUMENT);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      ++refused;
    }
  }
  MESSAGE(loaded << " mutated files loaded (bad lines skipped), " << refused << " refused");
  CHECK(loaded + refused == 20);
}

#ifdef LOOM_TEST_WITH_ARROW
TEST_CASE("sft: Parquet rows (a messages column of structs, as UltraChat's) and a save_to_disk folder give the references' samples") {
  const auto dir = tmp_dir("sft_parquet");
  const std::string data = write_data(dir, 60);
  const std::string parquet = (dir / "train.parquet").string(), saved = (dir / "saved").string();
  const auto r = run_shell(std::string(LOOM_PYTHON) + " -c \"import json, sys, datasets, pyarrow as pa, pyarrow.parquet as pq; "
                           "rows = [json.loads(l) for l in open(sys.argv[1])]; "
                           "pq.write_table(pa.Table.from_pylist(rows), sys.argv[2], row_group_size=16); "
                           "datasets.Dataset.from_list(rows).save_to_disk(sys.argv[3], num_shards=2)\" " +
                           data + " " + parquet + " " + saved);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  for (const std::string& files : {parquet, saved}) {
    CAPTURE(files);
    check_against_reference(data, options(files, dir / "cache", true), "");
  }
  const auto bad = run_shell(std::string(LOOM_PYTHON) + " -c \"import pyarrow as pa, pyarrow.parquet as pq; "
                             "pq.write_table(pa.table({'messages': [[{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'ok'}], []]}), '" +
                             (dir / "bad.parquet").string() + "')\"");
  REQUIRE_MESSAGE(bad.code == 0, bad.err);
  try {
    PluginDataset sft("sft", options((dir / "bad.parquet").string(), dir / "cache", true));
    FAIL("an empty list of messages was taken");
  } catch (const CreateError& e) {
    CHECK(std::string(e.what()).find("bad.parquet row 2: \"messages\" must be a non-empty list of messages") != std::string::npos);
  }
}
#endif
