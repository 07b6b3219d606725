// parquet_read_bench.cpp: how fast the `parquet` dataset turns table files into tokens: every
// part of every file read and tokenized exactly as the dataset does it (PartTokens, the same
// code), with THREADS threads tokenizing each part. tools/bench/parquet/parquet_bench drives it
// against Hugging Face datasets' .map on the same files.
//
//   loom_bench_parquet --tokenizer DIR [--threads N] [--column NAME] [--separator TOKEN] PATH
//
// Prints one JSON line: rows, tokens, seconds (reading and tokenizing, after the files' footers
// are read), and a digest of the ids (FNV-1a over them in order) for the agreement check.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "formats/table_file.hpp"
#include "formats/table_paths.hpp"
#include "plugins/datasets/parquet/part_tokens.hpp"

int main(int argc, char** argv) {
  std::string tokenizer_dir, column = "text", separator, path;
  unsigned threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--tokenizer" && has_value) tokenizer_dir = argv[++i];
    else if (a == "--threads" && has_value) threads = unsigned(std::stoul(argv[++i]));
    else if (a == "--column" && has_value) column = argv[++i];
    else if (a == "--separator" && has_value) separator = argv[++i];
    else if (path.empty() && a[0] != '-') path = a;
    else {
      std::fprintf(stderr, "usage: loom_bench_parquet --tokenizer DIR [--threads N] [--column NAME] [--separator TOKEN] PATH\n");
      return 2;
    }
  }
  if (path.empty() || tokenizer_dir.empty()) {
    std::fprintf(stderr, "loom_bench_parquet: give PATH and --tokenizer DIR\n");
    return 2;
  }
  try {
    const auto tokenizer = loom::tok::load_tokenizer(tokenizer_dir);
    loom::parquet_data::PartTokens parts;
    parts.column = column;
    parts.tokenizer = tokenizer.get();
    parts.threads = threads;
    parts.separator = separator.empty() ? tokenizer->info().eos_id : tokenizer->token_id(separator);
    const auto files = loom::formats::resolve_table_paths(path);
    std::vector<std::pair<std::string, size_t>> units;
    uint64_t rows = 0;
    for (const auto& f : files) {
      const auto table = loom::formats::TableFile::open(f);
      for (size_t p = 0; p < table.info().part_rows.size(); ++p) units.emplace_back(f, p);
      rows += table.info().rows;
    }
    const auto start = std::chrono::steady_clock::now();
    uint64_t tokens = 0, digest = 0xcbf29ce484222325ull;
    for (const auto& [file, part] : units) {
      const std::vector<int32_t> ids = parts.read(file, part);
      tokens += ids.size();
      for (const int32_t id : ids) digest = (digest ^ uint64_t(uint32_t(id))) * 0x100000001b3ull;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("{\"rows\": %llu, \"tokens\": %llu, \"seconds\": %.4f, \"digest\": \"%016llx\"}\n", (unsigned long long)rows,
                (unsigned long long)tokens, seconds, (unsigned long long)digest);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom_bench_parquet: %s\n", e.what());
    return 1;
  }
}
