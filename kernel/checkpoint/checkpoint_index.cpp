#include "checkpoint/checkpoint_index.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
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

// A checkpoint file is read only if it is a regular file of its own: O_NOFOLLOW refuses a
// symbolic link (it could point anywhere), O_NONBLOCK keeps a FIFO from blocking the open,
// and fstat refuses FIFOs and devices such as /dev/zero before any read.
int open_checkpoint_file(const fs::path& path) {
  int fd;
  do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == ELOOP) throw std::runtime_error(path.filename().string() + " is a symbolic link");
  if (fd < 0) throw std::runtime_error(path.string() + ": cannot read: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path.filename().string() + " is not a regular file");
  }
  return fd;
}

// Size and checksum of a file the index says has `declared` bytes; reading stops one byte past
// that, so a file that keeps growing cannot keep us reading.
FileDigest digest(const fs::path& path, uint64_t declared = UINT64_MAX - 1) {
  const int fd = open_checkpoint_file(path);
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> buffer(1 << 20);
  FileDigest out;
  while (out.bytes <= declared) {
    const size_t want = size_t(std::min<uint64_t>(buffer.size(), declared + 1 - out.bytes));
    const ssize_t n = ::read(fd, buffer.data(), want);
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

constexpr uint64_t kMaxIndexBytes = uint64_t(64) << 20;
constexpr size_t kMaxEntries = 1000000;
constexpr int64_t kMaxStep = int64_t(1) << 53;  // steps and token counts stay exact as JSON numbers

// index.json itself, under the same rules as the files it lists.
nlohmann::json read_index(const fs::path& path) {
  const int fd = open_checkpoint_file(path);
  struct stat st {};
  ::fstat(fd, &st);
  if (uint64_t(st.st_size) > kMaxIndexBytes) {
    ::close(fd);
    throw std::runtime_error("index.json is " + std::to_string(st.st_size >> 20) + " MiB, far larger than an index");
  }
  std::string text(size_t(st.st_size), '\0');
  size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += size_t(n);
  }
  ::close(fd);
  text.resize(used);
  return nlohmann::json::parse(text);
}

// Every entry of a checkpoint folder, recursively and without following links: regular files
// (relative names) and folders are all it may hold.
std::set<std::string> regular_files_in(const fs::path& dir) {
  std::set<std::string> files;
  fs::recursive_directory_iterator it(dir);  // never descends through a symbolic link
  for (const auto& entry : it) {
    if (files.size() > kMaxEntries) throw std::runtime_error("the folder holds more than a million entries");
    const fs::file_status st = entry.symlink_status();
    const std::string name = entry.path().lexically_relative(dir).generic_string();
    if (fs::is_symlink(st))
      throw std::runtime_error(name + " is a symbolic link; a checkpoint holds its own files (copy them in)");
    if (fs::is_directory(st)) continue;
    if (!fs::is_regular_file(st))
      throw std::runtime_error(name + " is not a regular file (a FIFO, socket or device)");
    if (name != kCheckpointIndexName) files.insert(name);
  }
  return files;
}

// A count from a file someone handed over. Only JSON integers qualify: nlohmann converts a
// float such as 1e30 to an integer type without a range check (undefined behaviour).
int64_t bounded_count(const nlohmann::json& value, const std::string& what) {
  const bool fits = value.is_number_integer() && (!value.is_number_unsigned() || value.get<uint64_t>() <= uint64_t(kMaxStep));
  const int64_t v = fits ? value.get<int64_t>() : -1;
  if (v < 0 || v > kMaxStep)
    throw std::runtime_error(what + " is " + value.dump().substr(0, 64) + ", not a count from 0 to 2^53");
  return v;
}

}  // namespace

std::optional<int64_t> checkpoint_step_of(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.rfind("step-", 0) != 0 || name.size() <= 5) return std::nullopt;
  const std::string digits = name.substr(5);
  // At most 18 digits: any more would overflow int64 (std::stoll would throw on a hostile name).
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(digits);
}

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
  for (const auto& item : backend.options)  // no structured binding: a C++17 lambda cannot capture one
    std::visit([&](const auto& v) { options[item.first] = v; }, item.second);
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
    const nlohmann::json backend = read_index(path).at("backend");
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
  std::error_code ec;
  if (fs::is_symlink(dir, ec)) {
    *why = "the folder is a symbolic link; name the folder it points to";
    return std::nullopt;
  }
  if (!fs::is_directory(fs::symlink_status(dir, ec))) {
    *why = fs::exists(fs::symlink_status(dir, ec)) ? "not a folder"
                                                   : "no such folder (deleted, or rotated away by [checkpoint] keep)";
    return std::nullopt;
  }
  if (!fs::exists(fs::symlink_status(path, ec))) {
    *why = "no index.json (an interrupted save)";
    return std::nullopt;
  }
  try {
    const nlohmann::json index = read_index(path);
    if (index.at("format") != "loom-checkpoint-index") throw std::runtime_error("not a Loom checkpoint index");
    const nlohmann::json& version = index.at("version");
    if (!version.is_number_integer() || version.get<int64_t>() < 1 || version.get<int64_t>() > kIndexVersion)
      throw std::runtime_error("index version " + version.dump() + " is not one this host reads (1 to " +
                               std::to_string(kIndexVersion) + "); a newer Loom wrote it?");
    const int64_t step = bounded_count(index.at("step"), "its step");
    if (const auto named = checkpoint_step_of(dir); named && *named != step)
      throw std::runtime_error("the index says step " + std::to_string(step) + " but the folder is " +
                               dir.filename().string());
    // The files the index names are exactly the regular files in the folder: nothing outside
    // it, no links, no FIFOs or devices, nothing unlisted that a backend might read unchecked.
    std::set<std::string> unlisted = regular_files_in(dir);
    for (const auto& file : index.at("files")) {
      const std::string name = file.at("path").get<std::string>();
      const fs::path relative = fs::path(name).lexically_normal();
      if (name.empty() || name.size() > 4096 || relative.is_absolute() || *relative.begin() == ".." ||
          relative.generic_string() != name)
        throw std::runtime_error("the index names \"" + name.substr(0, 200) + "\", which is not a plain path inside the checkpoint folder");
      if (unlisted.erase(name) == 0) {
        if (fs::exists(fs::symlink_status(dir / relative, ec)))
          throw std::runtime_error(name + " is not a regular file of the folder");
        throw std::runtime_error(name + " is missing");
      }
      const auto declared = static_cast<uint64_t>(bounded_count(file.at("bytes"), "the byte count of " + name));
      const FileDigest d = digest(dir / relative, declared);
      if (d.bytes != declared)
        throw std::runtime_error(name + " has " + (d.bytes > declared ? "more than " : "") + std::to_string(d.bytes) +
                                 " bytes, the index says " + std::to_string(declared));
      if (d.xxh64 != file.at("xxh64").get<std::string>()) throw std::runtime_error(name + " fails its checksum");
    }
    if (!unlisted.empty())
      throw std::runtime_error(*unlisted.begin() + " is in the folder but not in its index (added after the save?)");
    return step;
  } catch (const std::exception& e) {
    *why = e.what();
    return std::nullopt;
  }
}

}  // namespace loom
