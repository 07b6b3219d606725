// replay_main.cpp: the fuzz targets without libFuzzer. Calls LLVMFuzzerTestOneInput once on every
// file under the given files and folders (recursively, in sorted order), as libFuzzer would on a
// corpus, so the seed corpus and every saved crash replay in the normal test suite in seconds.
//
//   TARGET_fuzz_replay PATH...
//
// Exit status 0 when every input was handled (a finding aborts the process, naming the input
// just before), 2 on a usage error or when the paths hold no input at all. A path that does not
// exist is skipped (tests/fuzz/regressions/TARGET appears with a target's first crash).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path path = argv[i];
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::recursive_directory_iterator(path))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else if (fs::is_regular_file(path)) {
      inputs.push_back(path);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "%s: no input files under the given paths\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) {
      std::fprintf(stderr, "%s: cannot read\n", path.c_str());
      return 2;
    }
    std::fprintf(stderr, "replay %s (%zu bytes)\n", path.c_str(), bytes.size());
    // A copy of exactly the input's size, so ASan sees a read one past its end (libFuzzer does the same).
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    static const uint8_t empty = 0;  // libFuzzer passes a valid pointer for an empty input too
    LLVMFuzzerTestOneInput(copy.empty() ? &empty : copy.data(), copy.size());
  }
  std::fprintf(stderr, "replayed %zu inputs\n", inputs.size());
  return 0;
}
