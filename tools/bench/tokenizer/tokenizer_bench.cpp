// tokenizer_bench.cpp: Loom's tokenizer encoding a text file, single-threaded, best of REPS
// (tools/bench/tokenizer drives it against tiktoken). Writes the ids for the agreement check.
//
//   loom_bench_tokenizer TOKENIZER TEXT_FILE REPS IDS_OUT.json   -> JSON on stdout
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: loom_bench_tokenizer TOKENIZER TEXT_FILE REPS IDS_OUT.json\n";
    return 2;
  }
  const auto load_start = std::chrono::steady_clock::now();
  const auto tokenizer = loom::tok::load_tokenizer(argv[1]);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  std::stringstream buffer;
  buffer << std::ifstream(argv[2], std::ios::binary).rdbuf();
  const std::string text = buffer.str();
  nlohmann::json seconds = nlohmann::json::array();
  std::vector<int32_t> ids;
  for (int r = 0; r < std::atoi(argv[3]); ++r) {
    const auto start = std::chrono::steady_clock::now();
    ids = tokenizer->encode(text, false);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::ofstream(argv[4]) << nlohmann::json(ids).dump();
  std::cout << nlohmann::json{{"seconds", seconds}, {"tokens", ids.size()}, {"bytes", text.size()}, {"load_seconds", load_seconds}}.dump()
            << "\n";
  return 0;
}
