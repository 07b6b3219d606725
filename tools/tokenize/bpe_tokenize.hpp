// bpe_tokenize.hpp: loom-tokenize with a real tokenizer (--tokenizer). Documents are read in
// input order in batches, encoded by a pool of threads (one tokenizer serves them all), and
// handed to the writer in input order again, so the token file is the same whatever the thread
// count. Each text file is one document; each line of a .jsonl file is one document (its
// `field` string). Progress goes to stderr: a live line on a terminal, a line per 10% otherwise.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace loom::data {

struct BpeTokenizeOptions {
  unsigned threads = 1;
  bool append_eos = true;          // the tokenizer's EOS after each document, where it has one
  std::string jsonl_field = "text";
};

struct BpeTokenizeStats {
  uint64_t documents = 0, bytes = 0, tokens = 0;
  double seconds = 0;
};

// Encodes every document of `files`, calling `write` with each document's ids in input order.
BpeTokenizeStats bpe_tokenize(const std::vector<std::filesystem::path>& files, const tok::Tokenizer& tokenizer,
                              const BpeTokenizeOptions& options,
                              const std::function<void(const std::vector<int32_t>&)>& write);

// The number of CPUs this process may run on (its affinity mask: right under taskset, Slurm and
// containers), at least 1.
unsigned usable_cpus();

}  // namespace loom::data
