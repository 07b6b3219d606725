// Every bad data input, through the real host binary with the real mlp_lm and adamw plugins:
// exit code 2 and one "error: " line that names the file and says how to fix it. A valid
// control run of the same manifest exits 0, so each failure comes from the one thing changed.
#include <doctest/doctest.h>

#include <fstream>

#include "plugin_dataset.hpp"

using namespace loom_test;

namespace {

// Runs a 2-step training whose [data] table is `data` (TOML lines); the run goes into dir.
Result train_with(const fs::path& dir, const std::string& data) {
  const std::string manifest = "[run]\nname = \"bad-data\"\ndir = \"" + (dir / "runs").string() +
                               "\"\nsteps = 2\nlog_every = 1\n\n"
                               "[model]\nuse = \"mlp_lm\"\nvocab_size = 256\n\n"
                               "[data]\n" + data + "\n"
                               "[optimizer]\nuse = \"adamw\"\n";
  std::ofstream(dir / "m.toml") << manifest;
  return run_host("run " + (dir / "m.toml").string());
}

std::string token_data(const fs::path& file, int seq_len = 8, const std::string& extra = "") {
  return "use = \"token_file\"\npath = \"" + file.string() + "\"\nbatch_size = 2\nseq_len = " +
         std::to_string(seq_len) + "\n" + extra;
}

std::string text_data(const fs::path& path, int seq_len = 8) {
  return "use = \"text\"\npath = \"" + path.string() + "\"\nbatch_size = 2\nseq_len = " + std::to_string(seq_len) + "\n";
}

// Exit 2; the last stderr line is the only "error: " line and holds every part.
void expect_bad_input(const Result& r, const std::vector<std::string>& parts) {
  CAPTURE(r.err);
  CHECK(r.code == 2);
  const std::string err = r.err;
  REQUIRE(!err.empty());
  CHECK(err.back() == '\n');
  const size_t last = err.rfind('\n', err.size() - 2);
  const std::string line = err.substr(last == std::string::npos ? 0 : last + 1);
  CHECK(line.rfind("error: ", 0) == 0);
  CHECK(err.find("error: ") == (last == std::string::npos ? 0 : last + 1));  // no other error line
  for (const auto& p : parts) CHECK_MESSAGE(contains(line, p), p);
}

void write_raw(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::vector<uint32_t> bytes_of(const std::string& text) {
  return std::vector<uint32_t>(text.begin(), text.end());
}

const std::string kText = "the quick brown fox jumps over the lazy dog, again and again and again.\n";

}  // namespace

TEST_CASE("control: valid token_file and text data train with exit 0") {
  const fs::path dir = tmp_dir("bad-data-control");
  const fs::path tok = write_token_file(dir / "ok.tok", bytes_of(kText));
  const Result a = train_with(dir, token_data(tok, 8, "vocab_size = 256\n"));
  CHECK_MESSAGE(a.code == 0, a.err);
  std::ofstream(dir / "ok.txt") << kText;
  const Result b = train_with(dir, text_data(dir / "ok.txt"));
  CHECK_MESSAGE(b.code == 0, b.err);
}

TEST_CASE("token_file: a missing file") {
  const fs::path dir = tmp_dir("bad-data-missing");
  const std::string file = (dir / "nope.tok").string();
  expect_bad_input(train_with(dir, token_data(file)),
                   {file + ": no such file", "create it with `loom-tokenize INPUT... -o " + file + "`"});
}

TEST_CASE("token_file: a file whose size is not a whole number of tokens") {
  const fs::path dir = tmp_dir("bad-data-partial");
  const fs::path file = write_token_file(dir / "odd.tok", bytes_of(kText));
  std::ofstream(file, std::ios::binary | std::ios::app) << 'x';
  expect_bad_input(train_with(dir, token_data(file)),
                   {file.string() + ": the " + std::to_string(2 * kText.size() + 1) +
                        " bytes after the header are not a whole number of 2-byte tokens",
                    "re-create it with `loom-tokenize"});
}

TEST_CASE("token_file: wrong magic") {
  const fs::path dir = tmp_dir("bad-data-magic");
  write_raw(dir / "text.tok", kText);  // text where tokens were expected
  expect_bad_input(train_with(dir, token_data(dir / "text.tok")),
                   {(dir / "text.tok").string() + ": not a Loom token file", "re-create it with `loom-tokenize"});
}

TEST_CASE("token_file: wrong version") {
  const fs::path dir = tmp_dir("bad-data-version");
  const fs::path file = write_token_file(dir / "v2.tok", bytes_of(kText));
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(8);
  f.put(2);
  f.close();
  expect_bad_input(train_with(dir, token_data(file)),
                   {file.string() + ": token file version 2 is not supported (this build reads version 1)",
                    "re-create it with `loom-tokenize"});
}

TEST_CASE("token_file: a token id >= vocab_size, named with its offset") {
  const fs::path dir = tmp_dir("bad-data-vocab");
  std::vector<uint32_t> tokens = bytes_of(kText);
  tokens[37] = 300;
  tokens[50] = 999;  // only the first is reported
  const fs::path file = write_token_file(dir / "wide.tok", tokens);
  expect_bad_input(train_with(dir, token_data(file, 8, "vocab_size = 256\n")),
                   {file.string() + ": the token at element offset 37 has id 300, not below vocab_size 256",
                    "set [model] vocab_size (and [data] vocab_size) to at least 301",
                    "or re-tokenize the data with the model's tokenizer"});
}

TEST_CASE("token_file and text: seq_len longer than the data") {
  const fs::path dir = tmp_dir("bad-data-short");
  const fs::path file = write_token_file(dir / "short.tok", bytes_of("0123456789"));
  expect_bad_input(train_with(dir, token_data(file, 16)),
                   {file.string() + ": seq_len 16 is longer than the data: a window needs 17 tokens but there are only 10",
                    "lower seq_len or use more data"});
  std::ofstream(dir / "short.txt") << "0123456789";
  expect_bad_input(train_with(dir, text_data(dir / "short.txt", 16)),
                   {(dir / "short.txt").string() + ": seq_len 16 is longer than the data", "lower seq_len"});
}

TEST_CASE("text: an empty directory, a directory without matching files, a missing path") {
  const fs::path dir = tmp_dir("bad-data-text");
  fs::create_directories(dir / "empty");
  expect_bad_input(train_with(dir, text_data(dir / "empty")),
                   {(dir / "empty").string() + ": the directory is empty", "point the path at text files"});
  fs::create_directories(dir / "code");
  std::ofstream(dir / "code" / "main.cpp") << kText;
  expect_bad_input(train_with(dir, text_data(dir / "code")),
                   {(dir / "code").string() + ": no files ending in .txt,.md", "change extensions or the path"});
  expect_bad_input(train_with(dir, text_data(dir / "missing")),
                   {(dir / "missing").string() + ": no such file or directory; check the path"});
}
