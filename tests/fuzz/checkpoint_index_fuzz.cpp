// checkpoint_index_fuzz.cpp: the checkpoint index reader, kernel/checkpoint/checkpoint_index.hpp
// verify_checkpoint and read_checkpoint_backend.
//
// The input is index.json of a checkpoint folder that also holds two data files, model.bin
// (5 bytes, "hello") and rank-0/part.bin (empty), so an index naming them gets as far as their
// sizes and checksums. Documented outcomes: verify_checkpoint answers a step or nullopt with
// a reason and never throws; read_checkpoint_backend returns the record or throws loom::Failure.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "base/failure.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "fuzz_support.hpp"

namespace {

const std::filesystem::path& checkpoint_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = loom_fuzz::scratch_dir() / "step-1";
    std::filesystem::create_directories(d / "rank-0");
    loom_fuzz::write_file(d / "model.bin", "hello", 5);
    loom_fuzz::write_file(d / "rank-0" / "part.bin", "", 0);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = checkpoint_dir();
  loom_fuzz::write_file(dir / loom::kCheckpointIndexName, data, size);
  loom_fuzz::expect_only<loom_fuzz::NoException>("verify_checkpoint", [&] {
    std::string why;
    const std::optional<int64_t> step = loom::verify_checkpoint(dir, &why);
    if (!step && why.empty()) loom_fuzz::finding("verify_checkpoint refused the index without a reason");
  });
  loom_fuzz::expect_only<loom::Failure>("read_checkpoint_backend", [&] {
    const loom::CheckpointBackendRecord record = loom::read_checkpoint_backend(dir);
    size_t total = record.use.size();
    for (const auto& [key, value] : record.options) total += key.size() + value.index();
    loom_fuzz::keep(total);
  });
  return 0;
}
