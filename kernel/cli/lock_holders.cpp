#include "cli/lock_holders.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace loom {
namespace {

// The real uid of a live process, from /proc/PID/status.
std::optional<uid_t> process_uid(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      unsigned long uid = 0;
      if (fields >> uid) return static_cast<uid_t>(uid);
    }
  return std::nullopt;
}

std::optional<int> pid_of(const std::string& name) {
  if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(name);
}

}  // namespace

std::string user_name(uid_t uid) {
  if (const passwd* pw = ::getpwuid(uid)) return pw->pw_name;
  return "uid " + std::to_string(uid);
}

std::optional<int> flock_holder(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  char device[32];
  std::snprintf(device, sizeof device, "%02x:%02x:", ::major(st.st_dev), ::minor(st.st_dev));
  const std::string exact = device + std::to_string(st.st_ino);
  const std::string inode = ":" + std::to_string(st.st_ino);
  // Lines such as "3: FLOCK  ADVISORY  WRITE 4242 fe:00:5351649 0 EOF"; "->" marks a waiter.
  // Some file systems (overlayfs) show another device than fstat does: then the inode alone,
  // when it is the only flock on that inode number.
  std::ifstream in("/proc/locks");
  std::optional<int> by_device, by_inode;
  int inode_matches = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("->") != std::string::npos) continue;
    std::istringstream fields(line);
    std::string id, kind, advisory, mode, pid, where;
    if (!(fields >> id >> kind >> advisory >> mode >> pid >> where) || kind != "FLOCK") continue;
    const auto holder = pid_of(pid);
    if (!holder) continue;
    if (where == exact) by_device = holder;
    if (where.size() > inode.size() && where.compare(where.size() - inode.size(), inode.size(), inode) == 0) {
      by_inode = holder;
      ++inode_matches;
    }
  }
  if (by_device) return by_device;
  if (inode_matches == 1) return by_inode;
  return std::nullopt;
}

bool process_alive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

std::string describe_process(int pid) {
  std::string out = "pid " + std::to_string(pid);
  std::string command;
  std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/comm"), command);
  const auto uid = process_uid(pid);
  if (uid || !command.empty())
    out += " (" + (uid ? "user " + user_name(*uid) : std::string()) + (uid && !command.empty() ? ", " : "") + command + ")";
  return out;
}

std::vector<int> processes_holding_deleted(const fs::path& path) {
  const std::string target = path.string() + " (deleted)";
  const int self = static_cast<int>(::getpid());
  std::vector<int> out;
  // Increments that report errors instead of throwing: processes come and go during the walk.
  std::error_code ec;
  for (fs::directory_iterator proc("/proc", ec), end; !ec && proc != end; proc.increment(ec)) {
    const auto pid = pid_of(proc->path().filename().string());
    if (!pid || *pid == self) continue;
    std::error_code fd_ec;
    for (fs::directory_iterator fd(proc->path() / "fd", fd_ec); !fd_ec && fd != end; fd.increment(fd_ec)) {
      std::error_code link_ec;
      if (fs::read_symlink(fd->path(), link_ec) == target && !link_ec) {
        out.push_back(*pid);
        break;
      }
    }
  }
  return out;
}

}  // namespace loom
