// bad_file_test.cpp: tokenizer files are downloaded from strangers. A bad one is refused with
// one message naming the file and the JSON path; a FIFO does not block; a pathological regular
// expression stops at its limit; 3000 mutated files never crash the reader or the encoder.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer/byte_level.hpp"
#include "formats/format_error.hpp"
#include "run_host.hpp"
#include "tokenizer/tokenizer.hpp"

using loom::tok::TokenizerError;

namespace {

const char* kGood = R"({"added_tokens": [{"id": 3, "content": "<s>", "special": true}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\s+|\\p{L}+|\\p{N}"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 4}, "merges": ["a b"]}})";

std::string write_folder(const std::string& name, const std::string& tokenizer_json) {
  const auto dir = loom_test::tmp_dir("tokenizer_bad_" + name);
  std::ofstream(dir / "tokenizer.json") << tokenizer_json;
  return dir.string();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string load_error(const std::string& dir) {
  try {
    loom::tok::load_tokenizer(dir)->encode("ab ab 12");
  } catch (const TokenizerError& e) {
    return e.what();
  } catch (const loom::formats::FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the good file loads, so the bad ones below fail for their own reason") {
  const auto tok = loom::tok::load_tokenizer(write_folder("good", kGood));
  CHECK(tok->encode("ab") == std::vector<int32_t>{3, 2});
  CHECK(tok->decode({3, 2}) == "<s>ab");
}

TEST_CASE("each bad tokenizer.json is one message naming the file and the place") {
  struct Case {
    const char* name;
    std::string text;
    const char* expect;
  };
  const Case cases[] = {
      {"not_json", "{\"model\":\n{", "line 2 is not valid JSON"},
      {"unigram", replaced(kGood, "\"type\": \"BPE\"", "\"type\": \"Unigram\""), "model.type \"Unigram\" is not supported"},
      {"pre_tok_type", replaced(kGood, "\"type\": \"ByteLevel\", \"add_prefix_space\"", "\"type\": \"Punct\", \"add_prefix_space\""),
       "pre_tokenizer.pretokenizers[1].type \"Punct\" is not supported"},
      {"bad_regex", replaced(kGood, "\\\\s+|", "(\\\\s+|"), "pre_tokenizer.pretokenizers[0].pattern: the regular expression does not compile"},
      {"bad_behavior", replaced(kGood, "Isolated", "Sideways"), "pre_tokenizer.pretokenizers[0].behavior \"Sideways\""},
      {"merge_unknown", replaced(kGood, "\"a b\"", "\"a z\""), "model.merges[0] merges tokens into one that the vocabulary lacks"},
      {"negative_id", replaced(kGood, "\"a\": 0", "\"a\": -5"), "model.vocab[\"a\"] must be an id from 0"},
      {"huge_id", replaced(kGood, "\"a\": 0", "\"a\": 99999999999"), "model.vocab[\"a\"] must be an id from 0"},
      {"template_unknown", replaced(kGood, "{\"id\": \"<s>\", \"type_id\": 0}", "{\"id\": \"<x>\", \"type_id\": 0}"),
       "post_processor.single[0].SpecialToken.id names \"<x>\""},
      {"wrong_type", replaced(kGood, "\"invert\": false", "\"invert\": \"no\""), "pre_tokenizer.pretokenizers[0].invert has the wrong type"},
      {"normalizer", replaced(kGood, "\"NFC\"", "\"Precompiled\""), "normalizer.type \"Precompiled\" is not supported"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string dir = write_folder(c.name, c.text);
    const std::string error = load_error(dir);
    CHECK_MESSAGE(error.find(c.expect) != std::string::npos, error);
    CHECK_MESSAGE(error.find(dir + "/tokenizer.json") != std::string::npos, error);
    CHECK(error.find('\n') == std::string::npos);
  }
}

TEST_CASE("a folder without a tokenizer, a missing path and a FIFO are refused without blocking") {
  const auto empty = loom_test::tmp_dir("tokenizer_empty");
  CHECK(load_error(empty.string()).find("has neither tokenizer.json nor tokenizer.model") != std::string::npos);
  CHECK(load_error((empty / "nope").string()).find("does not exist") != std::string::npos);
  const auto fifo = loom_test::tmp_dir("tokenizer_fifo");
  REQUIRE(::mkfifo((fifo / "tokenizer.json").c_str(), 0600) == 0);
  CHECK(!load_error(fifo.string()).empty());  // returns at once: opened non-blocking, not a regular file
}

TEST_CASE("a pathological regular expression stops at the match limit instead of running for hours") {
  const std::string dir = write_folder("catastrophic", replaced(kGood, "\\\\s+|\\\\p{L}+|\\\\p{N}", "(a+)+$"));
  const auto tok = loom::tok::load_tokenizer(dir);
  CHECK_THROWS_AS(tok->encode(std::string(40, 'a') + "!"), TokenizerError);
}

TEST_CASE("3000 mutated tokenizer files and texts never crash the reader or the encoder") {
  std::mt19937_64 rng(7);
  // The good file with every byte's character in the vocabulary, so any text can encode.
  auto base = nlohmann::json::parse(kGood);
  for (int b = 0; b < 256; ++b) base["model"]["vocab"][loom::tok::bytes_to_chars(std::string(1, static_cast<char>(b)))] = 10 + b;
  const std::string good = base.dump();
  size_t loaded = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = good;
    for (int m = 0, n = 1 + static_cast<int>(rng() % 4); m < n; ++m) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = static_cast<char>(rng() % 256); break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, text.substr(rng() % text.size(), 1 + rng() % 12)); break;
      }
    }
    const std::string dir = write_folder("fuzz", text);
    try {
      const auto tok = loom::tok::load_tokenizer(dir);
      std::string input;
      for (int k = 0; k < 64; ++k) input += static_cast<char>(rng() % 256);
      const auto ids = tok->encode(input + " ab <s> ab");
      tok->decode(ids);
      tok->decode({-1, 0, 1 << 30});
      ++loaded;
    } catch (const TokenizerError&) {
      ++refused;
    } catch (const loom::formats::FormatError&) {
      ++refused;
    }
  }
  MESSAGE("mutated tokenizer.json: " << loaded << " loaded and encoded, " << refused << " refused");
  CHECK(loaded + refused == 3000);
  CHECK(refused > 0);
}
