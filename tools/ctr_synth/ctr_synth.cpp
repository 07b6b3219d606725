// loom-ctr-synth: a synthetic click-through dataset in the Criteo TSV layout, drawn from a known
// logistic model (synth_truth.hpp), so a model trained on it has a known best AUC to reach.
//
//   loom-ctr-synth --out DIR [--train-files N] [--rows-per-file N] [--eval-rows N] [--dense N]
//                  [--sparse N] [--vocab N] [--multi-hot K] [--seed S] [--missing P]
//                  [--write-probabilities]
//
// Writes DIR/train-000.tsv .. train-{N-1}.tsv, DIR/eval.tsv, DIR/truth.json (the AUC and log
// loss of the true probabilities, the positive rate, the row counts, every parameter) and, with
// --write-probabilities, DIR/eval-probabilities.txt (each eval line's true probability). The
// same arguments give the same bytes. Torch-free.
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "synth_metrics.hpp"
#include "synth_truth.hpp"

namespace {

using namespace ctr_synth;

constexpr const char* kUsage =
    "usage: loom-ctr-synth --out DIR [options]\n"
    "Writes a Criteo-format click dataset (label, dense counts, hex categorical ids) drawn from a known\n"
    "logistic model, for the criteo_tsv dataset; truth.json holds the best AUC any model can reach.\n"
    "  --out DIR              where train-NNN.tsv, eval.tsv and truth.json go (created)\n"
    "  --train-files N        training files (default 4, at most 1000)\n"
    "  --rows-per-file N      rows per training file (default 200000)\n"
    "  --eval-rows N          rows of eval.tsv (default 20000)\n"
    "  --dense N              dense integer features (default 13)\n"
    "  --sparse N             categorical features (default 26)\n"
    "  --vocab N              distinct ids per categorical feature (default 200)\n"
    "  --multi-hot K          the last K categorical features hold 1 to 3 ids each (default 2)\n"
    "  --seed S               the data's seed (default 1)\n"
    "  --missing P            probability that a cell is empty (default 0.05)\n"
    "  --write-probabilities  also write eval-probabilities.txt, each eval line's true probability\n"
    "Read it with [data] use = \"criteo_tsv\", files = \"DIR/train-000.tsv,...\" (or a folder holding only the\n"
    "training files), dense_features and sparse_features as above, table_rows well above the vocabulary.\n"
    "exit codes: 0 done, 1 cannot write, 2 bad usage\n";

struct Options {
  std::string out;
  int64_t train_files = 4, rows_per_file = 200000, eval_rows = 20000;
  Shape shape;
  uint64_t seed = 1;
  bool write_probabilities = false;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "loom-ctr-synth: %s; see --help\n", message.c_str());
  std::exit(2);
}

[[noreturn]] void write_error(const std::string& path) {
  std::fprintf(stderr, "loom-ctr-synth: %s: cannot write: %s\n", path.c_str(), std::strerror(errno));
  std::exit(1);
}

uint64_t unsigned_arg(const std::string& name, const std::string& value, uint64_t lo, uint64_t hi) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || errno == ERANGE || *end != '\0' || v < lo || v > hi)
    usage_error(name + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got \"" +
                value + "\"");
  return v;
}

double probability_arg(const std::string& name, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0 && v < 1))
    usage_error(name + " must be a probability in [0, 1), got \"" + value + "\"");
  return v;
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i], value;
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (name == "--write-probabilities") {
      o.write_probabilities = true;
      continue;
    }
    if (name.rfind("--", 0) != 0) usage_error("unexpected argument \"" + name + "\"");
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usage_error(name + " needs a value");
    }
    constexpr uint64_t kMaxRows = uint64_t(1) << 32;
    if (name == "--out") o.out = value;
    else if (name == "--train-files") o.train_files = int64_t(unsigned_arg(name, value, 1, 1000));
    else if (name == "--rows-per-file") o.rows_per_file = int64_t(unsigned_arg(name, value, 1, kMaxRows));
    else if (name == "--eval-rows") o.eval_rows = int64_t(unsigned_arg(name, value, 1, kMaxRows));
    else if (name == "--dense") o.shape.dense = int64_t(unsigned_arg(name, value, 0, 1000));
    else if (name == "--sparse") o.shape.sparse = int64_t(unsigned_arg(name, value, 0, 1000));
    else if (name == "--vocab") o.shape.vocab = int64_t(unsigned_arg(name, value, 1, 10000000));
    else if (name == "--multi-hot") o.shape.multi_hot = int64_t(unsigned_arg(name, value, 0, 1000));
    else if (name == "--seed") o.seed = unsigned_arg(name, value, 0, UINT64_MAX);
    else if (name == "--missing") o.shape.missing = probability_arg(name, value);
    else usage_error("unknown option " + name);
  }
  if (o.out.empty()) usage_error("--out DIR is required");
  if (o.shape.dense + o.shape.sparse == 0) usage_error("--dense and --sparse are both 0; a row needs a feature");
  if (o.shape.multi_hot > o.shape.sparse)
    usage_error("--multi-hot " + std::to_string(o.shape.multi_hot) + " is more than --sparse " +
                std::to_string(o.shape.sparse));
  return o;
}

struct Split {
  std::vector<double> p;   // true probabilities
  std::vector<uint8_t> y;  // labels
};

// Draws `rows` rows into path (label first), keeping each row's probability and label.
void write_rows(const std::string& path, int64_t rows, const Truth& truth, Rng& rng, Split& split) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) write_error(path);
  std::string buffer, columns;
  for (int64_t r = 0; r < rows; ++r) {
    columns.clear();
    const double p = sigmoid(truth.bias + draw_row(truth, rng, columns));
    const bool y = rng.chance(p);
    split.p.push_back(p);
    split.y.push_back(y ? 1 : 0);
    buffer += y ? "1\t" : "0\t";
    buffer += columns;
    buffer += '\n';
    if (buffer.size() >= (1u << 20) || r + 1 == rows) {
      if (std::fwrite(buffer.data(), 1, buffer.size(), f) != buffer.size()) write_error(path);
      buffer.clear();
    }
  }
  if (std::fclose(f) != 0) write_error(path);
}

void write_text(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0)
    write_error(path);
}

double positive_rate(const Split& s) {
  double n = 0;
  for (uint8_t y : s.y) n += y;
  return s.y.empty() ? 0 : n / double(s.y.size());
}

nlohmann::json or_null(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    std::fprintf(stderr, "loom-ctr-synth: %s: cannot create the directory: %s\n", o.out.c_str(), ec.message().c_str());
    return 1;
  }
  const Truth truth = make_truth(o.shape, o.seed);
  const std::string dir = o.out + "/";

  Split train, eval;
  Rng train_rng(o.seed, 2), eval_rng(o.seed, 3);
  for (int64_t i = 0; i < o.train_files; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "train-%03d.tsv", int(i));
    write_rows(dir + name, o.rows_per_file, truth, train_rng, train);
  }
  write_rows(dir + "eval.tsv", o.eval_rows, truth, eval_rng, eval);
  if (o.write_probabilities) {
    std::string text;
    char line[40];
    for (double p : eval.p) text.append(line, size_t(std::snprintf(line, sizeof line, "%.17g\n", p)));
    write_text(dir + "eval-probabilities.txt", text);
  }

  Split all = train;
  all.y.insert(all.y.end(), eval.y.begin(), eval.y.end());
  const std::optional<double> eval_auc = exact_auc(eval.p, eval.y), train_auc = exact_auc(train.p, train.y);
  nlohmann::ordered_json j;
  j["format"] = "loom-ctr-synth";
  j["version"] = 1;
  j["eval_auc"] = or_null(eval_auc);
  j["train_auc"] = or_null(train_auc);
  j["eval_logloss"] = log_loss(eval.p, eval.y);
  j["train_logloss"] = log_loss(train.p, train.y);
  j["positive_rate"] = positive_rate(all);
  j["eval_positive_rate"] = positive_rate(eval);
  j["target_positive_rate"] = kTargetPositiveRate;
  j["rows"] = {{"train", o.train_files * o.rows_per_file}, {"eval", o.eval_rows}};
  j["parameters"] = {{"seed", o.seed},          {"train_files", o.train_files}, {"rows_per_file", o.rows_per_file},
                     {"eval_rows", o.eval_rows}, {"dense", o.shape.dense},       {"sparse", o.shape.sparse},
                     {"vocab", o.shape.vocab},   {"multi_hot", o.shape.multi_hot}, {"missing", o.shape.missing}};
  j["model"] = {{"bias", truth.bias},
                {"sigma_dense", truth.sigma_dense},
                {"sigma_sparse", truth.sigma_sparse},
                {"zipf_exponent", kZipfExponent},
                {"dense_transform", "log(1 + x) for x > 0, else 0"},
                {"multi_hot_pooling", "mean"}};
  write_text(dir + "truth.json", j.dump(2) + "\n");

  std::printf("loom-ctr-synth: %s: %lld training rows in %lld files, %lld eval rows; positive rate %.4f; the true "
              "model's eval AUC %.4f, log loss %.4f\n",
              o.out.c_str(), (long long)(o.train_files * o.rows_per_file), (long long)o.train_files,
              (long long)o.eval_rows, positive_rate(all), eval_auc.value_or(0.5), log_loss(eval.p, eval.y));
  return 0;
}
