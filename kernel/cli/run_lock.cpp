#include "cli/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/failure.hpp"
#include "cli/run_folder.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "an unknown host";
  return name;
}

// Who holds the lock, from what the holder wrote into the lock file. The holder writes right
// after it locks, so a reader may catch the file empty for a moment; a few tries cover that.
std::string describe_holder(int fd) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    char text[512] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    const nlohmann::json j = nlohmann::json::parse(text, text + (n > 0 ? n : 0), nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("pid") && j["pid"].is_number_integer() && j.contains("host") && j["host"].is_string())
      return "pid " + std::to_string(j["pid"].get<long long>()) + " on host " + j["host"].get<std::string>() +
             (j.contains("started") && j["started"].is_string() ? " (started " + j["started"].get<std::string>() + ")"
                                                                 : "");
    ::usleep(10000);
  }
  return "another process (its lock file names no pid)";
}

}  // namespace

RunFolderLock::RunFolderLock(const fs::path& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw runtime_failure(run_dir.string() + ": cannot create the run folder: " + ec.message());
  const fs::path path = run_dir / kRunLockFile;
  // O_NOFOLLOW and O_NONBLOCK: a link or a FIFO planted under the lock file's name is refused,
  // never followed or waited on.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0)
    throw usage_failure(path.string() + ": cannot open the run folder's lock file: " + std::strerror(errno) +
                        "; remove it if it is not a plain file");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? describe_holder(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK)
      throw runtime_failure(path.string() + ": cannot lock the run folder: " + std::strerror(error));
    throw usage_failure(run_dir.string() + " is in use by a live run: " + holder + " holds " + path.string() +
                        ". One run writes a folder at a time: wait for it to end or stop it, or choose another "
                        "run.name (--set run.name=...)");
  }
  const nlohmann::json holder = {{"pid", static_cast<long long>(::getpid())}, {"host", this_host()}, {"started", utc_timestamp()}};
  const std::string text = holder.dump() + "\n";
  // Best effort: the lock itself keeps a second writer out; the text only names the holder.
  const bool named = ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
  if (!named) spdlog::warn("{}: cannot write this run's pid into the lock file: {}", path.string(), std::strerror(errno));
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace loom
