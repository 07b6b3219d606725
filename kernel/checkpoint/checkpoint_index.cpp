#include "checkpoint/checkpoint_index.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/failure.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

constexpr int kIndexVersion = 1;

struct FileDigest {
  uint64_t bytes = 0;
  std::string xxh64;
};

FileDigest digest(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw runtime_failure(path.string() + ": cannot read: " + std::strerror(errno));
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> buffer(1 << 20);
  FileDigest out;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      XXH64_freeState(state);
      throw runtime_failure(path.string() + ": cannot read: " + std::strerror(error));
    }
    if (n == 0) break;
    XXH64_update(state, buffer.data(), static_cast<size_t>(n));
    out.bytes += static_cast<uint64_t>(n);
  }
  ::close(fd);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64_digest(state)));
  XXH64_freeState(state);
  out.xxh64 = hex;
  return out;
}

}  // namespace

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw runtime_failure(path.string() + ": cannot open to sync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) throw runtime_failure(path.string() + ": fsync failed: " + std::strerror(error));
}

void write_checkpoint_index(const fs::path& dir, int64_t step, const CheckpointBackendRecord& backend) {
  nlohmann::json files = nlohmann::json::array();
  std::vector<fs::path> paths;
  // Recursive: a sharded checkpoint keeps each rank's files in its rank-<R> folder.
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path() != dir / kCheckpointIndexName) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    fsync_path(path);
    const FileDigest d = digest(path);
    files.push_back({{"path", path.lexically_relative(dir).generic_string()}, {"bytes", d.bytes}, {"xxh64", d.xxh64}});
  }
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_directory()) fsync_path(entry.path());
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [key, value] : backend.options) std::visit([&](const auto& v) { options[key] = v; }, value);
  const nlohmann::json index = {{"format", "loom-checkpoint-index"},
                                {"version", kIndexVersion},
                                {"step", step},
                                {"backend", {{"use", backend.use}, {"options", options}}},
                                {"files", files}};
  const fs::path path = dir / kCheckpointIndexName;
  {
    std::ofstream out(path, std::ios::trunc);
    out << index.dump(2) << "\n";
    out.flush();
    if (!out) throw runtime_failure(path.string() + ": cannot write the checkpoint index (disk full?)");
  }
  fsync_path(path);
  fsync_path(dir);
}

CheckpointBackendRecord read_checkpoint_backend(const fs::path& dir) {
  const fs::path path = dir / kCheckpointIndexName;
  try {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("missing");
    const nlohmann::json backend = nlohmann::json::parse(in).at("backend");
    CheckpointBackendRecord out;
    out.use = backend.at("use").get<std::string>();
    for (const auto& [key, value] : backend.at("options").items()) {
      if (value.is_boolean()) out.options[key] = value.get<bool>();
      else if (value.is_number_integer()) out.options[key] = value.get<int64_t>();
      else if (value.is_number()) out.options[key] = value.get<double>();
      else out.options[key] = value.get<std::string>();
    }
    return out;
  } catch (const std::exception& e) {
    throw usage_failure(path.string() + ": not a readable Loom checkpoint index (" + e.what() +
                        "); pass a step-N directory");
  }
}

std::optional<int64_t> verify_checkpoint(const fs::path& dir, std::string* why) {
  const fs::path path = dir / kCheckpointIndexName;
  if (!fs::exists(path)) {
    *why = "no index.json (an interrupted save)";
    return std::nullopt;
  }
  nlohmann::json index;
  try {
    std::ifstream in(path);
    index = nlohmann::json::parse(in);
    if (index.at("format") != "loom-checkpoint-index") throw std::runtime_error("not a Loom checkpoint index");
    if (index.at("version").get<int>() > kIndexVersion)
      throw std::runtime_error("index version " + index.at("version").dump() + " is newer than this host");
    for (const auto& file : index.at("files")) {
      const fs::path relative = fs::path(file.at("path").get<std::string>()).lexically_normal();
      if (relative.empty() || relative.is_absolute() || *relative.begin() == "..")
        throw std::runtime_error("the index names " + relative.string() + ", outside the checkpoint folder");
      const fs::path data = dir / relative;
      if (!fs::exists(data)) throw std::runtime_error(file.at("path").get<std::string>() + " is missing");
      const FileDigest d = digest(data);
      if (d.bytes != file.at("bytes").get<uint64_t>())
        throw std::runtime_error(file.at("path").get<std::string>() + " has " + std::to_string(d.bytes) +
                                 " bytes, the index says " + file.at("bytes").dump());
      if (d.xxh64 != file.at("xxh64").get<std::string>())
        throw std::runtime_error(file.at("path").get<std::string>() + " fails its checksum");
    }
    return index.at("step").get<int64_t>();
  } catch (const std::exception& e) {
    *why = e.what();
    return std::nullopt;
  }
}

}  // namespace loom
