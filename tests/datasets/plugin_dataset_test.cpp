// The real `token_file` and `text` plugins, loaded as the host loads them: batches are windows
// of the data shifted by one, deterministic in the seed, disjoint across ranks, reshuffled per
// epoch, exactly resumable from their state bytes; token_file keeps its resident set small;
// both plugins stay torch-free and export one symbol.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "abi/compute_components.hpp"
#include "plugin_dataset.hpp"
#include "plugins/datasets/common/text_files.hpp"

using namespace loom_test;

namespace {

toml::table token_options(const fs::path& file, int64_t B, int64_t T) {
  return toml::table{{"path", file.string()}, {"batch_size", B}, {"seq_len", T}};
}

// Window starts of one batch from a file of tokens 0, 1, 2, ...; checks the shift by one.
std::vector<int64_t> starts_of(const Rows& r) {
  std::vector<int64_t> out;
  for (int64_t b = 0; b < r.B; ++b) {
    const int64_t start = r.inputs[size_t(b * r.T)];
    for (int64_t t = 0; t < r.T; ++t) {
      REQUIRE(r.inputs[size_t(b * r.T + t)] == start + t);
      REQUIRE(r.targets[size_t(b * r.T + t)] == start + t + 1);
    }
    out.push_back(start);
  }
  return out;
}

// Resident kB of the mappings of `file` in this process (from /proc/self/smaps).
long resident_kb_of(const fs::path& file) {
  const std::string name = fs::canonical(file).string();
  std::ifstream smaps("/proc/self/smaps");
  long total = 0;
  bool in_file = false;
  for (std::string line; std::getline(smaps, line);) {
    const std::string first = line.substr(0, line.find(' '));
    const bool header = first.find('-') != std::string::npos &&
                        first.find_first_not_of("0123456789abcdef-") == std::string::npos;
    if (header) in_file = line.size() > name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0;
    else if (in_file && line.rfind("Rss:", 0) == 0) total += std::stol(line.substr(4));
  }
  return total;
}

}  // namespace

TEST_CASE("token_file batches are (B, T) windows at multiples of T, targets the inputs shifted by one") {
  const fs::path dir = tmp_dir("plugin-windows");
  for (uint32_t bytes : {2u, 4u}) {
    CAPTURE(bytes);
    const fs::path file = write_token_file(dir / ("iota" + std::to_string(bytes) + ".tok"), iota_tokens(48 * 8 + 1 + 3), bytes);
    PluginDataset d("token_file", token_options(file, 4, 8));
    for (int i = 0; i < 20; ++i) {
      const Rows r = d.next();
      REQUIRE(r.B == 4);
      REQUIRE(r.T == 8);
      for (int64_t s : starts_of(r)) {
        CHECK(s % 8 == 0);
        CHECK(s + 8 < 48 * 8 + 1);  // the 3-token tail never starts a window
      }
    }
  }
}

TEST_CASE("uint32 token ids beyond 65535 arrive intact") {
  const fs::path dir = tmp_dir("plugin-wide");
  std::vector<uint32_t> tokens(17);
  for (uint32_t i = 0; i < 17; ++i) tokens[i] = 100000 + 70000 * i;
  PluginDataset d("token_file", token_options(write_token_file(dir / "wide.tok", tokens, 4), 2, 8));
  std::set<int64_t> firsts;
  for (int i = 0; i < 4; ++i) {
    const Rows r = d.next();
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t first = r.inputs[size_t(b * 8)];
      firsts.insert(first);
      CHECK(r.targets[size_t(b * 8 + 7)] == first + 8 * 70000);
    }
  }
  CHECK(firsts == std::set<int64_t>{100000, 100000 + 8 * 70000});
}

TEST_CASE("the host's DatasetInstance accepts the batches: int64 (B, T), every target carries loss") {
  const fs::path file = write_token_file(tmp_dir("plugin-instance") / "iota.tok", iota_tokens(1000));
  const loom::Component* c = plugin_registry().lookup(LOOM_KIND_DATASET, "token_file");
  REQUIRE(c != nullptr);
  loom::SlotConfig slot{"data", c, {}};
  slot.config.values = loom::resolve_options(token_options(file, 3, 16), c->options, "[data] token_file", "", {"use"});
  loom::RunContext run{(fs::path(LOOM_TEST_TMP) / "dataset-run").string(), "cpu", 0, 0, 1, 10};
  loom::DatasetInstance data(slot, run);
  const loom::Batch b = data.next();
  CHECK(b.inputs.sizes() == at::IntArrayRef({3, 16}));
  CHECK(b.tokens == 3 * 16);
  CHECK(at::equal(b.targets, b.inputs + 1));
}

TEST_CASE("token_file: one epoch over 1, 2 and 4 ranks reads disjoint windows, as many as the counts say") {
  const fs::path dir = tmp_dir("plugin-ranks");
  const int64_t T = 8, B = 3;
  for (int64_t windows : {48, 50}) {  // 48: every window is read on each rank count; 50: some left over
    const fs::path file = write_token_file(dir / ("w" + std::to_string(windows) + ".tok"), iota_tokens(uint32_t(windows * T + 1)));
    for (int32_t world : {1, 2, 4}) {
      CAPTURE(windows);
      CAPTURE(world);
      const int64_t batches = (windows / world) / B;  // per rank per epoch
      std::set<int64_t> seen;
      int64_t drawn = 0;
      for (int32_t rank = 0; rank < world; ++rank) {
        PluginDataset d("token_file", token_options(file, B, T), {7, rank, world});
        for (int64_t i = 0; i < batches; ++i)
          for (int64_t s : starts_of(d.next())) {
            seen.insert(s / T);
            ++drawn;
          }
      }
      CHECK(drawn == world * batches * B);
      CHECK(seen.size() == size_t(drawn));
      if (windows % (world * B) == 0) CHECK(seen.size() == size_t(windows));
      CHECK(*seen.rbegin() < windows);
    }
  }
}

TEST_CASE("token_file: the same seed gives the same batches, another seed others; epochs reshuffle") {
  const fs::path file = write_token_file(tmp_dir("plugin-seed") / "iota.tok", iota_tokens(40 * 16 + 1));
  const auto options = token_options(file, 4, 16);  // 10 batches per epoch
  PluginDataset a("token_file", options, {1}), b("token_file", options, {1}), c("token_file", options, {2});
  const auto xa = a.next(25), xb = b.next(25), xc = c.next(25);
  CHECK(xa == xb);
  CHECK(xa != xc);
  std::vector<int64_t> e0, e1;
  for (int i = 0; i < 10; ++i)
    for (int64_t s : starts_of(xa[size_t(i)])) e0.push_back(s);
  for (int i = 10; i < 20; ++i)
    for (int64_t s : starts_of(xa[size_t(i)])) e1.push_back(s);
  CHECK(e0 != e1);  // another order...
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  CHECK(e0 == e1);  // ...of the same windows
  CHECK(std::set<int64_t>(e0.begin(), e0.end()).size() == 40);
}

TEST_CASE("state saved after k batches restores in a fresh instance to the identical next batches") {
  const fs::path dir = tmp_dir("plugin-state");
  const fs::path file = write_token_file(dir / "iota.tok", iota_tokens(30 * 8 + 5));
  std::string text;
  for (int i = 0; i < 300; ++i) text += char('a' + (i * 7) % 26);
  std::ofstream(dir / "corpus.txt") << text;
  struct Setup {
    const char* component;
    toml::table options;
  };
  const Setup setups[] = {{"token_file", token_options(file, 2, 8)},
                          {"text", toml::table{{"path", (dir / "corpus.txt").string()}, {"batch_size", 2}, {"seq_len", 8}}}};
  for (const Setup& s : setups) {
    // 2 ranks: token_file has 30 windows, 15 per rank, 7 batches per epoch; text 37, 18, 9.
    for (int k : {0, 3, 6, 7, 9, 16}) {  // mid-epoch, at and across epoch boundaries
      CAPTURE(s.component);
      CAPTURE(k);
      PluginDataset a(s.component, s.options, {5, 1, 2});
      a.next(k);
      const std::string state = a.save();
      const auto expected = a.next(12);  // what an uninterrupted run sees next
      PluginDataset b(s.component, s.options, {5, 1, 2});
      REQUIRE(b.load(state) == "");
      CHECK(b.next(12) == expected);
      if (k > 0) CHECK(PluginDataset(s.component, s.options, {5, 1, 2}).next(12) != expected);
    }
  }
}

TEST_CASE("a state from another configuration is refused with the reason and the data's name") {
  const fs::path dir = tmp_dir("plugin-state-mismatch");
  const fs::path file = write_token_file(dir / "a.tok", iota_tokens(30 * 8 + 5));
  const fs::path other = write_token_file(dir / "b.tok", iota_tokens(40 * 8 + 5));
  PluginDataset writer("token_file", token_options(file, 2, 8), {5, 1, 2});
  writer.next(3);
  const std::string state = writer.save();
  PluginDataset one_rank("token_file", token_options(file, 2, 8), {5, 0, 1});
  const std::string world = one_rank.load(state);
  CHECK(world.rfind(file.string() + ": ", 0) == 0);
  CHECK(contains(world, "world size 2 but this run has 1"));
  PluginDataset longer("token_file", token_options(file, 2, 4), {5, 1, 2});
  CHECK(contains(longer.load(state), "seq_len 8 but this run has 4"));
  PluginDataset changed("token_file", token_options(other, 2, 8), {5, 1, 2});
  CHECK(contains(changed.load(state), "token count 245 but this run has 325"));
  PluginDataset same("token_file", token_options(file, 2, 8), {5, 1, 2});
  CHECK(same.load(state) == "");
  CHECK(contains(same.load("garbage"), "not a window-sampler record"));
}

TEST_CASE("token_file hands the pages of each window back: the mapping's resident set stays near zero") {
  // 16 MiB of tokens; one epoch touches every window once.
  const fs::path file = write_token_file(tmp_dir("plugin-rss") / "big.tok", iota_tokens(8 << 20));
  PluginDataset d("token_file", toml::table{{"path", file.string()}, {"batch_size", 64}, {"seq_len", 256},
                                            {"vocab_size", int64_t(1) << 24}});  // the vocab scan touches it all too
  CHECK(resident_kb_of(file) <= 128);
  for (int i = 0; i < 512; ++i) d.next();  // every window of the file
  const long kb = resident_kb_of(file);
  CAPTURE(kb);
  CHECK(kb <= 128);  // without the release this is the whole file, 16384 kB
}

TEST_CASE("the dataset plugins are torch-free and export only loom_plugin_init") {
  for (const char* name : {"token_file", "text"}) {
    const std::string file = std::string(LOOM_PLUGIN_DIR) + "/" + name + ".so";
    CAPTURE(file);
    const Result nm = run_shell("nm -D --defined-only '" + file + "'");
    REQUIRE(nm.code == 0);
    std::istringstream lines(nm.out);
    std::vector<std::string> symbols;
    for (std::string line; std::getline(lines, line);) symbols.push_back(line.substr(line.rfind(' ') + 1));
    CHECK(symbols == std::vector<std::string>{"loom_plugin_init"});
    const Result ldd = run_shell("ldd '" + file + "'");
    REQUIRE(ldd.code == 0);
    CHECK_FALSE(contains(ldd.out, "libtorch"));
    CHECK_FALSE(contains(ldd.out, "libc10"));
  }
}

namespace {
// Runs the enclosing scope in another working directory.
struct WorkingDirectory {
  fs::path before = fs::current_path();
  explicit WorkingDirectory(const fs::path& dir) { fs::current_path(dir); }
  ~WorkingDirectory() { fs::current_path(before); }
};
}  // namespace

TEST_CASE("text over this repository from its root: path \".\" with the source extensions works") {
  const WorkingDirectory in_repo(LOOM_SOURCE_DIR);
  const std::string extensions = ".cpp,.hpp,.h,.c,.md,.toml";
  loom::data::TextWalkOptions walk;
  walk.extensions = loom::data::parse_extensions(extensions);
  walk.exclude_dirs = {"runs/x", "runs"};  // what the dataset skips for run.dir = "runs"
  const auto files = loom::data::collect_text_files({"."}, walk);
  CHECK(files.size() > 50);
  CHECK(std::find(files.begin(), files.end(), fs::path("./README.md")) != files.end());
  CHECK(std::find(files.begin(), files.end(), fs::path("./plugins/datasets/text/text.cpp")) != files.end());
  for (const auto& f : files) {
    CAPTURE(f);
    const fs::path rel = f.lexically_relative(".");
    CHECK(rel.begin()->string() != "runs");
    for (const auto& part : rel) {
      CHECK(part.string()[0] != '.');             // no hidden directory or file
      CHECK(part.string().rfind("build", 0) != 0);  // no build tree (build/, build-data/, ...)
    }
  }
  PluginDataset d("text", toml::table{{"path", "."}, {"extensions", extensions}, {"batch_size", 4}, {"seq_len", 64}},
                  {0, 0, 1, "runs/x"});
  const Rows r = d.next();
  CHECK(r.B == 4);
  CHECK(r.T == 64);
}

TEST_CASE("text never reads the folder its own run writes into") {
  const fs::path dir = tmp_dir("plugin-text-run-dir");
  std::ofstream(dir / "a.txt") << "abcdefghi";  // exactly one window of 8 + 1
  fs::create_directories(dir / "runs" / "r1");
  std::ofstream(dir / "runs" / "r1" / "notes.txt") << std::string(64, 'Z');
  const toml::table options{{"path", dir.string()}, {"batch_size", 1}, {"seq_len", 8}};
  PluginDataset in_run("text", options, {0, 0, 1, (dir / "runs" / "r1").string()});
  for (const Rows& r : in_run.next(6)) CHECK(r.inputs == std::vector<int64_t>{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'});
  // Control: run elsewhere, the same folder is ordinary data.
  PluginDataset elsewhere("text", options, {0, 0, 1, (dir.parent_path() / "elsewhere" / "r1").string()});
  bool saw_z = false;
  for (const Rows& r : elsewhere.next(9)) saw_z |= std::find(r.inputs.begin(), r.inputs.end(), 'Z') != r.inputs.end();
  CHECK(saw_z);
}

TEST_CASE("token_file refuses a directory and a FIFO, and bad data at create is INVALID_ARGUMENT (the host's exit 2)") {
  const fs::path dir = tmp_dir("plugin-create-errors");
  const auto error_of = [](const toml::table& options) {
    try {
      PluginDataset d("token_file", options);
    } catch (const CreateError& e) {
      CHECK(e.code == LOOM_STATUS_CODE_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(token_options(dir, 2, 8)) ==
        dir.string() + ": is a directory; point path at one token file made by loom-tokenize (the `text` dataset "
                       "reads directories of text files)");
  const fs::path small = write_token_file(dir / "small.tok", iota_tokens(20));
  CHECK(contains(error_of(token_options(small, 2, 32)), "seq_len 32 is longer than the data"));
  CHECK(contains(error_of(token_options(small, 4, 8)), "fewer than batch_size 4"));
  CHECK(contains(error_of(token_options(small, 0, 8)), "token_file: batch_size must be positive, got 0"));
  CHECK(contains(error_of(token_options(dir / "missing.tok", 2, 8)), "missing.tok: no such file"));
  // A FIFO is refused at once: opening one for reading without O_NONBLOCK waits for a writer.
  const fs::path fifo = dir / "fifo.tok";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(contains(error_of(token_options(fifo, 2, 8)), "fifo.tok: is not a regular file"));
  CHECK(error_of(token_options(small, 2, 8)).empty());  // control
}
