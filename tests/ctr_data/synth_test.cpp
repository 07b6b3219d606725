// loom-ctr-synth, run as a user runs it: the same seed gives the same bytes, every line parses
// as a Criteo line, truth.json's eval AUC equals an independent O(n^2) pair count over the
// written probabilities, and the positive rate is near its 0.25 target.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plugins/datasets/criteo_tsv/criteo_line.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::read_file;
using loom_test::run_shell;

namespace {

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

loom_test::Result synth(const std::string& args) { return run_shell(std::string(LOOM_CTR_SYNTH_BIN) + " " + args); }

}  // namespace

TEST_CASE("loom-ctr-synth: --help, and one line with exit 2 for bad arguments") {
  const loom_test::Result help = synth("--help");
  CHECK(help.code == 0);
  CHECK(help.out.rfind("usage: loom-ctr-synth --out DIR", 0) == 0);
  for (const std::string& bad : {std::string(""), std::string("--out x --vocab 0"), std::string("--out x --missing 1"),
                                 std::string("--out x --rows-per-file 12k"), std::string("--out x --frobnicate 3"),
                                 std::string("--out x --sparse 2 --multi-hot 3"), std::string("--out")}) {
    const loom_test::Result r = synth(bad);
    CHECK_MESSAGE(r.code == 2, bad);
    CHECK_MESSAGE(loom_test::line_count(r.err) == 1, bad << ": " << r.err);
    CHECK_MESSAGE(r.err.rfind("loom-ctr-synth: ", 0) == 0, bad);
  }
  CHECK(synth("--out x --vocab 0").err ==
        "loom-ctr-synth: --vocab must be an integer from 1 to 10000000, got \"0\"; see --help\n");
}

TEST_CASE("loom-ctr-synth: the same seed writes the same bytes; another seed does not") {
  const fs::path a = loom_test::tmp_dir("ctr-synth-a"), b = loom_test::tmp_dir("ctr-synth-b"),
                 c = loom_test::tmp_dir("ctr-synth-c");
  const std::string args = " --train-files 2 --rows-per-file 500 --eval-rows 300 --vocab 50 --write-probabilities";
  REQUIRE(synth("--out " + a.string() + args + " --seed 9").code == 0);
  REQUIRE(synth("--out " + b.string() + args + " --seed 9").code == 0);
  REQUIRE(synth("--out " + c.string() + args + " --seed 10").code == 0);
  for (const char* name : {"train-000.tsv", "train-001.tsv", "eval.tsv", "truth.json", "eval-probabilities.txt"}) {
    CHECK_MESSAGE(read_file(a / name) == read_file(b / name), name);
    CHECK_MESSAGE(read_file(a / name) != read_file(c / name), name);
  }
  CHECK(!fs::exists(a / "train-002.tsv"));
}

TEST_CASE("loom-ctr-synth: every line is a Criteo line; truth.json's AUC is the exact pair count; positives near 25%") {
  const fs::path dir = loom_test::tmp_dir("ctr-synth-truth");
  const loom_test::Result r = synth("--out " + dir.string() +
                                    " --train-files 2 --rows-per-file 2000 --eval-rows 1500 --write-probabilities");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const nlohmann::json truth = nlohmann::json::parse(read_file(dir / "truth.json"));

  loom::criteo::LineFormat format;
  format.table_rows.assign(26, 1000003);
  loom::criteo::Sample sample;
  double positives = 0, rows = 0, multi_id_cells = 0;
  std::vector<int> eval_labels;
  for (const char* name : {"train-000.tsv", "train-001.tsv", "eval.tsv"}) {
    const std::vector<std::string> lines = lines_of(dir / name);
    CHECK(lines.size() == (std::string(name) == "eval.tsv" ? 1500u : 2000u));
    for (size_t i = 0; i < lines.size(); ++i) {
      loom::criteo::parse_line(lines[i], format, name, i + 1, sample);
      positives += double(sample.label);
      rows += 1;
      for (size_t f = 24; f < 26; ++f) multi_id_cells += sample.id_ends[f] - (f ? sample.id_ends[f - 1] : 0) > 1;
      if (std::string(name) == "eval.tsv") eval_labels.push_back(int(sample.label));
    }
  }
  CHECK(multi_id_cells > 0);  // --multi-hot 2: the last two features hold several ids
  CHECK(std::fabs(positives / rows - 0.25) < 0.05);
  CHECK(truth["positive_rate"].get<double>() == doctest::Approx(positives / rows).epsilon(1e-12));
  CHECK(truth["rows"]["train"] == 4000);
  CHECK(truth["rows"]["eval"] == 1500);
  CHECK(truth["parameters"]["vocab"] == 200);

  std::vector<double> p;
  for (const std::string& line : lines_of(dir / "eval-probabilities.txt")) p.push_back(std::stod(line));
  REQUIRE(p.size() == eval_labels.size());
  // Every (positive, negative) pair: 2 when the positive scores higher, 1 on a tie.
  double twice_pairs = 0, pairs = 0, loss = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    loss -= eval_labels[i] ? std::log(p[i]) : std::log(1 - p[i]);
    if (!eval_labels[i]) continue;
    for (size_t j = 0; j < p.size(); ++j) {
      if (eval_labels[j]) continue;
      twice_pairs += p[i] > p[j] ? 2 : p[i] == p[j] ? 1 : 0;
      pairs += 1;
    }
  }
  const double auc = twice_pairs / (2 * pairs);
  CHECK(std::fabs(truth["eval_auc"].get<double>() - auc) < 1e-12);
  CHECK(truth["eval_logloss"].get<double>() == doctest::Approx(loss / double(p.size())).epsilon(1e-9));
  CHECK(auc > 0.72);  // a learnable signal, but far from separable
  CHECK(auc < 0.9);
  CHECK(truth["train_auc"].get<double>() > 0.72);
}
