// run_lock.hpp: one writer per run folder. Rank 0 of `host run` takes an advisory flock(2) on
// <run dir>/run.lock before it writes anything and holds it until the process ends; the kernel
// releases it when the process dies, however it dies, so a crash never leaves a stale lock.
// A second run on a locked folder is refused (exit 2) naming the holder's pid and host, before
// it touches any file. Readers (`host eval`, `checkpoint inspect`, `export`) take no lock.
#pragma once

#include <filesystem>

namespace loom {

inline constexpr const char* kRunLockFile = "run.lock";

class RunFolderLock {
 public:
  // Creates run_dir when missing, then locks it or throws a usage Failure naming the holder.
  explicit RunFolderLock(const std::filesystem::path& run_dir);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace loom
