// conformance_test.cpp: every document of the generated corpus encodes to the same ids, and
// those ids decode to the same text (with and without special tokens), in Loom's tokenizer and
// in Hugging Face's tokenizers (reference.py), for each real tokenizer. Prints the agreement counts and both timings
// (timings are information only; tools/bench/tokenizer measures speed).
#include <doctest/doctest.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "corpus.hpp"
#include "run_host.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer_files.hpp"

namespace {

constexpr size_t kCorpusBytes = 1'100'000;

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> documents = loom::test::tokenizer_corpus(kCorpusBytes, 20261125);
  return documents;
}

std::string corpus_file() {
  static const std::string path = [] {
    const std::string p = (loom_test::tmp_dir("tokenizer_corpus") / "corpus.bin").string();
    loom::test::write_corpus(corpus(), p);
    return p;
  }();
  return path;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string show_ids(const std::vector<int32_t>& ids, size_t around) {
  std::ostringstream out;
  for (size_t i = around > 5 ? around - 5 : 0; i < std::min(ids.size(), around + 6); ++i) out << (i == around ? "*" : "") << ids[i] << " ";
  return out.str();
}

void compare_with_reference(const std::string& name) {
  const std::string dir = loom_test::tokenizer_dir(name);
  const std::string out = (loom_test::tmp_dir("tokenizer_ref_" + name) / "reference.jsonl").string();
  auto start = std::chrono::steady_clock::now();
  const auto r = loom_test::run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/tests/tokenizers/reference.py " + dir +
                                      " " + corpus_file() + " " + out);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const double reference_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  const auto tokenizer = loom::tok::load_tokenizer(dir);
  const double load_seconds = seconds_since(start);

  std::istringstream lines(loom_test::read_file(out));
  std::string line;
  size_t doc = 0, same_ids = 0, same_text = 0, same_plain = 0, tokens = 0, bytes = 0;
  double encode_seconds = 0;
  std::string first_difference;
  while (std::getline(lines, line)) {
    REQUIRE(doc < corpus().size());
    const auto expected = nlohmann::json::parse(line);
    start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tokenizer->encode(corpus()[doc]);
    encode_seconds += seconds_since(start);
    const auto want = expected["ids"].get<std::vector<int32_t>>();
    tokens += want.size();
    bytes += corpus()[doc].size();
    if (ids == want) {
      ++same_ids;
    } else if (first_difference.empty()) {
      size_t at = 0;
      while (at < ids.size() && at < want.size() && ids[at] == want[at]) ++at;
      first_difference = "document " + std::to_string(doc) + " ids differ at " + std::to_string(at) + ": loom " +
                         show_ids(ids, at) + "| reference " + show_ids(want, at);
    }
    const std::string text = want.empty() ? "" : tokenizer->decode(want);
    const std::string plain = want.empty() ? "" : tokenizer->decode(want, true);
    same_text += text == expected["text"].get<std::string>();
    same_plain += plain == expected["plain"].get<std::string>();
    if (text != expected["text"].get<std::string>() && first_difference.empty())
      first_difference = "document " + std::to_string(doc) + " decodes differently";
    ++doc;
  }
  std::cout << name << ": " << same_ids << "/" << doc << " documents identical ids (" << tokens << " tokens, " << bytes
            << " bytes), " << same_text << "/" << doc << " identical text, " << same_plain << "/" << doc
            << " identical text without special tokens; loom load " << load_seconds << " s, encode " << encode_seconds
            << " s; Python tokenizers load+encode+decode " << reference_seconds << " s\n";
  if (!first_difference.empty()) std::cout << "  first difference: " << first_difference << "\n";
  CHECK(doc == corpus().size());
  CHECK(same_ids == doc);
  CHECK(same_text == doc);
  CHECK(same_plain == doc);
}

}  // namespace

TEST_CASE("the corpus is over 1 MB and holds every kind of text") {
  size_t bytes = 0;
  for (const auto& document : corpus()) bytes += document.size();
  CHECK(bytes >= kCorpusBytes);
  std::string all;
  for (const auto& document : corpus()) all += document;
  for (const char* part : {"我们", "これは", "👨‍👩‍👧‍👦", "\t\treturn", "<|im_start|>", "\xED\xA0\x80", "it's", "\xC2\x85"})
    CHECK_MESSAGE(all.find(part) != std::string::npos, part);
}

TEST_CASE("qwen3 tokenizes exactly as Hugging Face's tokenizers") { compare_with_reference("qwen3"); }
TEST_CASE("llama3 tokenizes exactly as Hugging Face's tokenizers") { compare_with_reference("llama3"); }
TEST_CASE("gemma3 tokenizes exactly as Hugging Face's tokenizers") { compare_with_reference("gemma3"); }
TEST_CASE("gpt4o tokenizes exactly as Hugging Face's tokenizers") { compare_with_reference("gpt4o"); }
TEST_CASE("llama2 tokenizes exactly as Hugging Face's tokenizers") { compare_with_reference("llama2"); }
