// Sequence and context parallelism on packed instruction rows: the `sft` dataset (the real Qwen3
// tokenizer and chat template) packs several samples into each row, with position_ids that
// restart and document_ids that keep attention inside each sample. Cut over 2 and 4 ranks
// (Ulysses' pieces, or the ring's chunks from both ends), the document masks span the parts'
// edges and the loss skips the unlabelled positions; 20 steps match one process, as do two
// pipeline stages (whose metrics only the last reports). Skipped (exit code 77) without
// ../shared/tokenizers/qwen3.
#define DOCTEST_CONFIG_IMPLEMENT
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "mesh_runs.hpp"
#include "tokenizer_files.hpp"

namespace fs = std::filesystem;
using namespace loom_mesh_test;

namespace {

std::string g_tokenizer;

// Short arithmetic dialogues: four to six fit a row of 64 positions.
std::string write_dialogues(const fs::path& dir) {
  const fs::path file = dir / "train.jsonl";
  std::ofstream out(file);
  for (int i = 0; i < 300; ++i) {
    const int a = i, b = (i * 7) % 50;
    out << nlohmann::json{{"messages",
                           {{{"role", "user"}, {"content", "What is " + std::to_string(a) + " + " + std::to_string(b) + "?"}},
                            {{"role", "assistant"}, {"content", std::to_string(a + b)}}}}}
               .dump()
        << "\n";
  }
  return file.string();
}

}  // namespace

TEST_CASE("packed rows with document masks, cut over 2 and 4 ranks either way, give one process's run") {
  const fs::path dir = loom_test::tmp_dir("sp-packed");
  const std::string vocab = "vocab_size = 151669\n";
  const std::string model = "[model]\nuse = \"llama\"\nn_layer = 2\nn_head = 4\nn_kv_head = 4\nn_embd = 32\n"
                            "seq_len = 64\n" + vocab;
  std::string m = manifest(dir, model);
  {  // the synthetic [data] table becomes sft's
    std::string text = loom_test::read_file(m);
    text = text.substr(0, text.find("[data]")) + "[data]\nuse = \"sft\"\nfiles = \"" + write_dialogues(dir) +
           "\"\ntokenizer = \"" + g_tokenizer + "\"\ncache_dir = \"" + (dir / "cache").string() +
           "\"\nseq_len = 64\nbatch_size = 4\n" + vocab + text.substr(text.find("[optimizer]"));
    std::ofstream(m) << text;
  }
  const Logged one = train(m, "w1", {1});
  check_same_run(one, train(m, "s2", {2, 1, 2}));
  check_same_run(one, train(m, "s4", {4, 1, 4}));
  check_same_run(one, train(m, "c2", {2, 1, 1, 2}));
  check_same_run(one, train(m, "c4", {4, 1, 1, 4}));
  // Two pipeline stages: the last reports the rows' fill, the first nothing; the names are
  // aligned across the stages before they are reduced, so the log holds one process's values.
  check_same_run(one, train(m, "p2", {2, 1, 1, 1, 2}));
  const auto fill = [&](const std::string& run) {
    std::vector<double> out;
    std::istringstream in(loom_test::read_file(dir / run / "metrics.jsonl"));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line).at("nonpad_fraction"));
    return out;
  };
  CHECK(fill("p2") == fill("w1"));
}

int main(int argc, char** argv) {
  g_tokenizer = loom_test::tokenizer_dir("qwen3");
  doctest::Context context(argc, argv);
  return context.run();
}
