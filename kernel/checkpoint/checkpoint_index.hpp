// checkpoint_index.hpp: what makes a checkpoint directory real. After the backend's files are
// written and fsync'd, index.json records each file's size and XXH64 checksum; only then is
// the directory renamed into place. A directory without a valid index is not a checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "abi/option_spec.hpp"

namespace loom {

inline constexpr const char* kCheckpointIndexName = "index.json";

// Which backend wrote a checkpoint, so tools can read it without the run's manifest.
struct CheckpointBackendRecord {
  std::string use;                                  // component name, e.g. "safetensors"
  std::map<std::string, OptionValue> options;       // its resolved options
};

// Writes index.json over every regular file in dir (fsyncs the files, the index and dir).
void write_checkpoint_index(const std::filesystem::path& dir, int64_t step, const CheckpointBackendRecord& backend);

// The step recorded in dir's index when every listed file matches its size and checksum;
// otherwise nullopt with the reason in *why.
std::optional<int64_t> verify_checkpoint(const std::filesystem::path& dir, std::string* why);

// The backend recorded in dir's index; throws a usage Failure when there is no readable index.
CheckpointBackendRecord read_checkpoint_backend(const std::filesystem::path& dir);

// "<dir>/step-N" for a directory name, or nullopt.
std::optional<int64_t> checkpoint_step_of(const std::filesystem::path& dir);

// fsync a file or directory; throws a runtime Failure naming the path.
void fsync_path(const std::filesystem::path& path);

}  // namespace loom
