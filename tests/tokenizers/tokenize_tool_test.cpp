// tokenize_tool_test.cpp: loom-tokenize --tokenizer writes, for each document in input order,
// exactly the ids the tokenizer gives it plus EOS, whatever the thread count; --decode gives the
// text back; bad JSONL lines and vocabularies too wide for --dtype are one-line errors (exit 2).
#include <doctest/doctest.h>

#include <fstream>

#include "plugins/datasets/common/little_endian.hpp"
#include "run_host.hpp"
#include "plugins/datasets/common/token_file_format.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer_files.hpp"

namespace {

std::vector<uint32_t> read_tokens(const std::string& path) {
  const std::string bytes = loom_test::read_file(path);
  REQUIRE(bytes.size() >= loom::data::kTokenFileHeaderBytes);
  const auto header = loom::data::parse_token_file_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), path);
  std::vector<uint32_t> ids;
  for (uint64_t i = 0; i < header.token_count; ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + loom::data::kTokenFileHeaderBytes + i * header.token_bytes;
    ids.push_back(header.token_bytes == 2 ? loom::data::load_le<uint16_t>(p) : loom::data::load_le<uint32_t>(p));
  }
  return ids;
}

std::string tool(const std::string& args) { return std::string(LOOM_TOKENIZE_BIN) + " " + args; }

}  // namespace

TEST_CASE("loom-tokenize --tokenizer: each document's ids then EOS, the same at 1 and 2 threads, decoded back") {
  const std::string qwen = loom_test::tokenizer_dir("qwen3");
  const auto dir = loom_test::tmp_dir("tokenize_tool");
  const std::vector<std::string> docs = {"Hello, world! It's 2026.\n", "我们训练模型。\n\tint x = 42;\n",
                                         "emoji 👨‍👩‍👧‍👦 and <|im_start|>user\nhi<|im_end|>"};
  for (size_t i = 0; i < docs.size(); ++i) std::ofstream(dir / ("doc" + std::to_string(i) + ".txt")) << docs[i];
  std::ofstream(dir / "more.jsonl") << R"({"body": "first line"})" << "\n\n" << R"({"body": "second 行"})" << "\n";

  const std::string inputs = (dir / "doc0.txt").string() + " " + (dir / "doc1.txt").string() + " " +
                             (dir / "doc2.txt").string() + " " + (dir / "more.jsonl").string();
  const auto one = loom_test::run_shell(tool(inputs + " --field body --tokenizer " + qwen + " --threads 1 -o " + (dir / "one.tok").string()));
  REQUIRE_MESSAGE(one.code == 0, one.err);
  CHECK(loom_test::contains(one.out, "5 document(s)"));
  CHECK(loom_test::contains(one.err, "100%"));
  const auto two = loom_test::run_shell(tool(inputs + " --field body --tokenizer " + qwen + " --threads 2 -o " + (dir / "two.tok").string()));
  REQUIRE_MESSAGE(two.code == 0, two.err);
  CHECK(loom_test::read_file(dir / "one.tok") == loom_test::read_file(dir / "two.tok"));

  const auto tokenizer = loom::tok::load_tokenizer(qwen);
  std::vector<uint32_t> expected;
  for (const std::string& doc : {docs[0], docs[1], docs[2], std::string("first line"), std::string("second 行")}) {
    for (const int32_t id : tokenizer->encode(doc)) expected.push_back(static_cast<uint32_t>(id));
    expected.push_back(static_cast<uint32_t>(*tokenizer->info().eos_id));
  }
  CHECK(read_tokens((dir / "one.tok").string()) == expected);  // uint32: Qwen3's vocabulary is over 65536

  const auto back = loom_test::run_shell(tool("--decode " + (dir / "one.tok").string() + " --tokenizer " + qwen));
  REQUIRE(back.code == 0);
  const std::string eos = tokenizer->info().eos_token;
  CHECK(back.out == docs[0] + eos + docs[1] + eos + docs[2] + eos + "first line" + eos + "second 行" + eos);
}

TEST_CASE("loom-tokenize --tokenizer refuses bad JSONL lines, narrow dtypes and bad tokenizers in one line") {
  const std::string qwen = loom_test::tokenizer_dir("qwen3");
  const auto dir = loom_test::tmp_dir("tokenize_tool_bad");
  std::ofstream(dir / "bad.jsonl") << R"({"text": "ok"})" << "\n" << "{not json\n";
  std::ofstream(dir / "field.jsonl") << R"({"body": "ok"})" << "\n";
  std::ofstream(dir / "a.txt") << "text";
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {(dir / "bad.jsonl").string() + " --tokenizer " + qwen, "bad.jsonl line 2: not valid JSON"},
      {(dir / "field.jsonl").string() + " --tokenizer " + qwen, "field.jsonl line 1: has no string field \"text\""},
      {(dir / "a.txt").string() + " --dtype uint16 --tokenizer " + qwen, "--dtype uint16 cannot hold this tokenizer's ids"},
      {(dir / "a.txt").string() + " --tokenizer " + dir.string(), "has neither tokenizer.json nor tokenizer.model"},
      {(dir / "a.txt").string() + " --threads 0 --tokenizer " + qwen, "--threads must be a whole number"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const auto r = loom_test::run_shell(tool(c.args + " -o " + (dir / "out.tok").string()));
    CHECK(r.code == 2);
    CHECK_MESSAGE(loom_test::contains(r.err, c.expect), r.err);
    CHECK(loom_test::line_count(r.err) == 1);
    CHECK(!std::filesystem::exists(dir / "out.tok"));
  }
}
