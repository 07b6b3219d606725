// generate_test.cpp: `host generate` through the real host binary, against the independent
// Python reference (tests/hf_models/hf_reference.py greedy: float64, the whole sequence
// recomputed each step) on tiny random Qwen3 and Llama folders with the real Qwen3 tokenizer.
#include <doctest/doctest.h>

#include <fstream>
#include <vector>
#include <nlohmann/json.hpp>

#include "generate_folders.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace loom_test;
using nlohmann::json;

namespace {

json generate(const std::string& args) {
  const auto r = run_host("generate " + args + " --json");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return json::parse(r.out);
}

std::string join(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

}  // namespace

TEST_CASE("greedy generation equals the Python reference's greedy decode (Qwen3 and Llama)") {
  for (const std::string arch : {"qwen3", "llama"}) {
    CAPTURE(arch);
    const std::string model = model_folder(arch);
    const json got = generate(model + " --prompt \"The capital of France is\" --max-new-tokens 12");
    const auto prompt = got["prompt_ids"].get<std::vector<int64_t>>();
    const auto tokenizer = loom::tok::load_tokenizer(model);
    const std::vector<int32_t> encoded = tokenizer->encode("The capital of France is");
    CHECK(prompt == std::vector<int64_t>(encoded.begin(), encoded.end()));
    const auto r = run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/tests/hf_models/hf_reference.py greedy --model " +
                             model + " --ids " + join(prompt) + " --new 12 --stop 2,151645");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(got["ids"] == json::parse(r.out)["ids"]);
  }
}

TEST_CASE("sampling is seeded: the same seed gives the same text, another seed another") {
  const std::string model = model_folder("qwen3");
  const std::string args = model + " --prompt \"Once upon a time\" --max-new-tokens 16 --temperature 1.0 --top-k 50 --top-p 0.9";
  const json a = generate(args + " --seed 1"), b = generate(args + " --seed 1"), c = generate(args + " --seed 2");
  CHECK(a["ids"] == b["ids"]);
  CHECK(a["ids"] != c["ids"]);
}

TEST_CASE("--chat renders the tokenizer's chat template with a generation prompt") {
  const std::string model = model_folder("qwen3");
  const json got = generate(model + " --chat --system \"Be brief.\" --prompt \"Hi\" --max-new-tokens 4");
  const auto tokenizer = loom::tok::load_tokenizer(model);
  const auto expect = tokenizer->encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false);
  CHECK(got["prompt_ids"].get<std::vector<int64_t>>() == std::vector<int64_t>(expect.begin(), expect.end()));
  // streaming: text on stdout, a rate line on stderr
  const auto r = run_host("generate " + model + " --prompt \"Hi\" --max-new-tokens 4");
  CHECK(r.code == 0);
  CHECK(contains(r.err, "tokens/s"));
}

TEST_CASE("the key/value cache changes nothing: --no-cache gives the same ids, past the 64-position context too") {
  // gpt2's vocabulary is the reference's 64 ids: a prompt of digits and signs stays inside it.
  for (const auto& [arch, prompt] : {std::pair<std::string, std::string>{"qwen3", "Once upon a time"}, {"gpt2", "1+2=3"}}) {
    CAPTURE(arch);
    const std::string model = arch == "gpt2" ? model_folder_with_vocab(arch, 0) : model_folder(arch);
    const std::string args = model + " --prompt \"" + prompt + "\" --max-new-tokens 70";
    const json cached = generate(args), recomputed = generate(args + " --no-cache");
    CHECK(cached["ids"].size() == 70);
    CHECK(cached["ids"] == recomputed["ids"]);
  }
}

TEST_CASE("--prompts answers each line on its own, as --prompt would, one JSON line each") {
  const std::string model = model_folder("qwen3");
  const auto file = std::filesystem::path(model).parent_path() / "prompts.txt";
  std::ofstream(file) << "What is 1 plus 2?\n\nRepeat: cat dog\n";
  const auto r = run_host("generate " + model + " --chat --prompts " + file.string() + " --max-new-tokens 6 --json");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(line_count(r.out) == 2);  // the blank line is skipped
  const json first = json::parse(r.out.substr(0, r.out.find('\n')));
  CHECK(first["ids"] == generate(model + " --chat --prompt \"What is 1 plus 2?\" --max-new-tokens 6")["ids"]);
}

TEST_CASE("bad generate input is one line with exit 2") {
  const std::string model = model_folder("qwen3");
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {model, "give --prompt TEXT, --prompts FILE, or --chat"},
      {model + " --prompt x --prompts " + model + "/config.json", "not both"},
      {model + " --prompts " + model + "/missing.txt", "generate: --prompts:"},
      {model + " --prompt x --temperature hot", "--temperature takes a number"},
      {model + " --prompt x --top-p 0", "--top-p must be in (0, 1]"},
      {(std::filesystem::path(model) / "nope").string() + " --prompt x", "is neither a valid checkpoint"},
      {model + " --prompt x --tokenizer " + model + "/missing", "generate: tokenizer:"},
  };
  const auto broken = std::filesystem::path(model).parent_path() / "broken";
  std::filesystem::create_directories(broken);
  for (const auto& entry : std::filesystem::directory_iterator(model))
    std::filesystem::copy_file(entry.path(), broken / entry.path().filename(), std::filesystem::copy_options::overwrite_existing);
  std::ofstream(broken / "generation_config.json") << "{bad";
  const Case more[] = {{broken.string() + " --prompt x", "generation_config.json' line 1 is not valid JSON"}};
  std::vector<Case> all(std::begin(cases), std::end(cases));
  all.insert(all.end(), std::begin(more), std::end(more));
  for (const Case& c : all) {
    CAPTURE(c.args);
    const auto r = run_host("generate " + c.args);
    CHECK(r.code == 2);
    CHECK_MESSAGE(contains(r.err, c.expect), r.err);
    CHECK(line_count(r.err) == 1);
  }
}
