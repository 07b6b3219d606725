// loom-tokenize: text -> token file -> --decode gives back the exact bytes; the token_file
// dataset reads exactly those tokens, and the text dataset the same batches from the text
// itself. Bad usage and bad input exit 2, I/O failure 1, each with one line naming the file.
#include <doctest/doctest.h>

#include <fstream>
#include <map>

#include "plugin_dataset.hpp"

using namespace loom_test;

namespace {

Result tokenize(const std::string& args) { return run_shell(std::string(LOOM_TOKENIZE_BIN) + " " + args); }

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Checks a failed run: the code, nothing on stdout, one "loom-tokenize: error: " line
// containing `part`; returns the line.
std::string one_error(const Result& r, int code, const std::string& part) {
  CAPTURE(r.err);
  CHECK(r.code == code);
  CHECK(r.out.empty());
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.rfind("loom-tokenize: error: ", 0) == 0);
  CHECK(contains(r.err, part));
  return r.err;
}

// A small corpus with multi-byte UTF-8, CRLF, a NUL byte and a file the extensions exclude.
struct Corpus {
  fs::path dir;
  std::string bytes;  // the expected token stream: the taken files in walk order
};

Corpus make_corpus(const std::string& name) {
  Corpus c{tmp_dir(name) / "docs", ""};
  const std::string a = "# Loom\n\nh\xC3\xA9llo w\xC3\xB6rld \xE2\x80\x94 \xE2\x9C\x93 \xF0\x9F\xA7\xB5\n";
  std::string b = "line one\r\nline two\r\n";
  b.push_back('\0');
  b += "after a NUL byte, then the end of the file";
  for (int i = 0; i < 20; ++i) b += " more text " + std::to_string(i);
  write(c.dir / "a.md", a);
  write(c.dir / "sub" / "b.txt", b);
  write(c.dir / "skip.cpp", "not taken: .cpp is not in the default extensions");
  write(c.dir / ".hidden" / "h.txt", "not taken: hidden");
  c.bytes = a + b;
  return c;
}

}  // namespace

TEST_CASE("text -> loom-tokenize -> --decode gives back exactly the input bytes") {
  const Corpus c = make_corpus("tokenize-roundtrip");
  for (const char* dtype : {"uint16", "uint32"}) {
    CAPTURE(dtype);
    const fs::path tok = c.dir.parent_path() / (std::string(dtype) + ".tok");
    const Result r = tokenize(c.dir.string() + " -o " + tok.string() + " --dtype " + dtype);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string n = std::to_string(c.bytes.size());
    CHECK(r.out == "loom-tokenize: 2 file(s), " + n + " bytes -> " + n + " " + dtype + " tokens in " + tok.string() + "\n");
    CHECK_FALSE(fs::exists(tok.string() + ".tmp"));

    // The file itself: the header, then one token per byte.
    const std::string raw = read_bytes(tok);
    const size_t width = std::string(dtype) == "uint16" ? 2 : 4;
    REQUIRE(raw.size() == 32 + width * c.bytes.size());
    for (size_t i = 0; i < c.bytes.size(); ++i) {
      uint32_t id = 0;
      for (size_t k = 0; k < width; ++k) id |= uint32_t(static_cast<unsigned char>(raw[32 + i * width + k])) << (8 * k);
      REQUIRE(id == static_cast<unsigned char>(c.bytes[i]));
    }

    const Result to_stdout = tokenize("--decode " + tok.string());
    REQUIRE_MESSAGE(to_stdout.code == 0, to_stdout.err);
    CHECK(to_stdout.out == c.bytes);
    const fs::path back = c.dir.parent_path() / "back.txt";
    const Result to_file = tokenize("--decode " + tok.string() + " -o " + back.string());
    REQUIRE_MESSAGE(to_file.code == 0, to_file.err);
    CHECK(read_bytes(back) == c.bytes);
  }
}

TEST_CASE("the token_file dataset reads exactly loom-tokenize's bytes, and text gives the same batches") {
  const Corpus c = make_corpus("tokenize-dataset");
  const fs::path tok = c.dir.parent_path() / "corpus.tok";
  REQUIRE(tokenize(c.dir.string() + " -o " + tok.string()).code == 0);
  const int64_t T = 8, B = 2;
  const int64_t windows = (int64_t(c.bytes.size()) - 1) / T;
  PluginDataset from_tokens("token_file", toml::table{{"path", tok.string()}, {"batch_size", B}, {"seq_len", T},
                                                      {"vocab_size", 256}});
  PluginDataset from_text("text", toml::table{{"path", c.dir.string()}, {"batch_size", B}, {"seq_len", T}});
  std::map<std::string, int> unread;  // each window's bytes -> how many windows hold them
  for (int64_t w = 0; w < windows; ++w) ++unread[c.bytes.substr(size_t(w * T), size_t(T + 1))];
  const int64_t batches = windows / B;
  for (int64_t i = 0; i < batches; ++i) {
    const Rows r = from_tokens.next();
    CHECK(from_text.next() == r);
    for (int64_t b = 0; b < B; ++b) {
      // Every row is a window of the text, byte for byte, and one epoch reads each at most once.
      std::string row;
      for (int64_t t = 0; t < T; ++t) row.push_back(char(r.inputs[size_t(b * T + t)]));
      row.push_back(char(r.targets[size_t(b * T + T - 1)]));
      CHECK_MESSAGE(--unread[row] >= 0, "row " << b << " of batch " << i << " is not an unread window of the text");
    }
  }
}

TEST_CASE("loom-tokenize: usage and input errors exit 2, I/O errors exit 1, one line naming the file") {
  const fs::path dir = tmp_dir("tokenize-errors");
  CHECK(tokenize("--help").code == 0);
  one_error(tokenize(""), 2, "no INPUT given; see loom-tokenize --help");
  one_error(tokenize(dir.string()), 2, "add -o OUT.tok");
  one_error(tokenize(dir.string() + " -o x.tok --dtype int8"), 2, "--dtype must be uint16 or uint32");
  one_error(tokenize(dir.string() + " -o x.tok --frobnicate"), 2, "unknown option --frobnicate");
  const std::string missing = (dir / "missing").string();
  one_error(tokenize(missing + " -o " + (dir / "x.tok").string()), 2, missing + ": no such file or directory");
  fs::create_directories(dir / "empty");
  one_error(tokenize((dir / "empty").string() + " -o " + (dir / "x.tok").string()), 2,
            (dir / "empty").string() + ": the directory is empty");
  write(dir / "text.txt", "some text");
  const std::string unwritable = (dir / "no-such-dir" / "x.tok").string();
  one_error(tokenize((dir / "text.txt").string() + " -o " + unwritable), 1, unwritable + ".tmp: cannot create");

  const fs::path not_bytes = write_token_file(dir / "wide.tok", {104, 105, 300, 33});
  one_error(tokenize("--decode " + not_bytes.string()), 2,
            not_bytes.string() + ": the token at element offset 2 has id 300, not a byte");
  const fs::path bad_magic = dir / "bad.tok";
  write(bad_magic, std::string(40, 'x'));
  one_error(tokenize("--decode " + bad_magic.string()), 2, bad_magic.string() + ": not a Loom token file");
  one_error(tokenize("--decode " + missing), 2, missing + ": no such file; check the path");
}
