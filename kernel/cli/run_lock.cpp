#include "cli/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "base/failure.hpp"
#include "base/writer_guard.hpp"
#include "cli/lock_holders.hpp"
#include "cli/run_folder.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "an unknown host";
  return name;
}

// Opens the lock file, creating it readable by this user alone, and checks that it is this
// user's to hold: a regular file with one link, owned by this user. O_NOFOLLOW and O_NONBLOCK:
// a link or a FIFO planted under the name is refused, never followed or waited on.
int open_lock_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0)
    throw usage_failure(path.string() + ": cannot open the run folder's lock file: " + std::strerror(errno) +
                        "; remove it if it is not a plain file of yours");
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0)
    problem = std::string("cannot stat it: ") + std::strerror(errno);
  else if (!S_ISREG(st.st_mode))
    problem = "it is not a plain file; remove it";
  else if (st.st_nlink > 1)
    problem = "it has " + std::to_string(st.st_nlink) +
              " hard links (a copy of the run folder made with cp -al or rsync --link-dest shares it with the other "
              "folder, so a run here would lock and write that one too); remove this folder's copy (rm " +
              path.string() + "), and the next run makes a file of its own";
  else if (st.st_uid != ::geteuid())
    problem = "it belongs to user " + user_name(st.st_uid) + ", not to " + user_name(::geteuid()) +
              " (another user who can open it can hold the lock and block this folder); if no run of theirs is "
              "live, remove it, and the next run makes one only its user can open";
  if (!problem.empty()) {
    ::close(fd);
    throw usage_failure(path.string() + ": refusing the run folder's lock file: " + problem);
  }
  if ((st.st_mode & 077) != 0) ::fchmod(fd, 0600);  // a file an earlier Loom made 0644
  return fd;
}

// Who holds the lock on fd: the process the kernel's lock table names, with what the holder
// wrote into the file when that is the same process; the file's text alone where /proc does
// not tell (another machine on a shared file system). The holder writes right after it locks,
// so a reader may catch the file empty for a moment; a few tries cover that.
std::string describe_holder(int fd) {
  const auto holder = flock_holder(fd);
  std::string named;
  long long named_pid = -1;
  for (int attempt = 0; attempt < 20 && named_pid < 0; ++attempt) {
    char text[512] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    const nlohmann::json j = nlohmann::json::parse(text, text + (n > 0 ? n : 0), nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("pid") && j["pid"].is_number_integer() && j.contains("host") && j["host"].is_string()) {
      named_pid = j["pid"].get<long long>();
      named = "on host " + j["host"].get<std::string>() +
              (j.contains("started") && j["started"].is_string() ? " (started " + j["started"].get<std::string>() + ")" : "");
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (holder && *holder == named_pid) return describe_process(*holder) + " " + named;
  if (holder)
    return describe_process(*holder) + (named_pid >= 0 ? " (the file names pid " + std::to_string(named_pid) +
                                                             ", an earlier holder)" : "");
  if (named_pid < 0) return "another process (its lock file names no pid)";
  return "pid " + std::to_string(named_pid) + " " + named;
}

std::string holders_list(const std::vector<int>& pids) {
  std::string out;
  for (size_t i = 0; i < pids.size(); ++i) out += (i ? ", " : "") + describe_process(pids[i]);
  return out;
}

}  // namespace

RunFolderLock::RunFolderLock(const fs::path& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  // Canonical: /proc names a deleted file's folder with every link resolved.
  if (!ec) run_dir_ = fs::canonical(run_dir, ec);
  if (ec) throw runtime_failure(run_dir.string() + ": cannot create the run folder: " + ec.message());
  path_ = run_dir_ / kRunLockFile;
  const int fd = open_lock_file(path_);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? describe_holder(fd) : "";
    ::close(fd);
    if (error != EWOULDBLOCK)
      throw runtime_failure(path_.string() + ": cannot lock the run folder: " + std::strerror(error));
    throw usage_failure(run_dir.string() + " is in use by a live run: " + holder + " holds " + path_.string() +
                        ". One run writes a folder at a time: wait for it to end or stop it, or choose another "
                        "run.name (--set run.name=...)");
  }
  // Someone may have deleted the lock file of a live run: that run still holds the deleted
  // file (and takes the name back at its next step). Locking the new file proves nothing then.
  if (const auto live = processes_holding_deleted(path_); !live.empty()) {
    ::close(fd);
    throw usage_failure(run_dir.string() + " is in use by a live run: " + holders_list(live) +
                        " still holds the run.lock that was deleted under it. One run writes a folder at a time: "
                        "wait for it to end or stop it, or choose another run.name (--set run.name=...); never "
                        "delete the lock file of a live run");
  }
  take(fd);
  set_writer_check([this] { verify(); });
}

bool RunFolderLock::take(int fd) {
  if (fd != fd_ && ::flock(fd, LOCK_EX | LOCK_NB) != 0) return false;
  struct stat st {};
  ::fstat(fd, &st);
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
  device_ = st.st_dev;
  inode_ = st.st_ino;
  const nlohmann::json holder = {{"pid", static_cast<long long>(::getpid())}, {"host", this_host()}, {"started", utc_timestamp()}};
  const std::string text = holder.dump() + "\n";
  // Best effort: the lock itself keeps a second writer out; the text only names the holder.
  const bool named = ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
  if (!named) spdlog::warn("{}: cannot write this run's pid into the lock file: {}", path_.string(), std::strerror(errno));
  return true;
}

void RunFolderLock::verify() {
  struct stat now {};
  if (::lstat(path_.c_str(), &now) == 0 && now.st_dev == device_ && now.st_ino == inode_) return;
  // Gone or replaced. Take the name back; a second run that is only checking (constructor
  // above) holds a new file for a moment, so a few tries.
  std::string why;
  for (int attempt = 0; attempt < 20 && why.empty(); ++attempt) {
    int fd = -1;
    try {
      fd = open_lock_file(path_);
    } catch (const Failure& f) {
      why = f.what();  // not a file this run may hold
      break;
    }
    if (take(fd)) {
      spdlog::warn("{} was deleted or replaced while this run held it; the run holds a new one. Deleting the lock "
                   "file of a live run lets a second run write the same folder: don't",
                   path_.string());
      return;
    }
    if (attempt == 19) why = describe_holder(fd) + " holds the new one";
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw FolderLost(path_.string() + " was deleted or replaced while this run held it, and " + why +
                   ": this run stops here and writes nothing more into " + run_dir_.string() +
                   " (its checkpoints and metrics so far stay as they are). Never delete the lock file of a live run");
}

RunFolderLock::~RunFolderLock() {
  set_writer_check({});
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace loom
