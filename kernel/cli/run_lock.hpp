// run_lock.hpp: one writer per run folder. Rank 0 of `host run` takes an advisory flock(2) on
// <run dir>/run.lock before it writes anything and holds it until the process ends; the kernel
// releases it when the process dies, however it dies, so a crash never leaves a stale lock.
// A second run on a locked folder is refused (exit 2) naming the holder (from the kernel's lock
// table, not only the pid the file names), before it touches any file. Readers (`host eval`,
// `checkpoint inspect`, `export`) take no lock.
//
// What an operator may do to the file, and what happens (README "The run folder"):
//  - the file is created 0600 and must belong to the run's user, so no other user can open it
//    and hold the lock; one with another owner is refused, naming the owner;
//  - a file with more than one hard link (a folder copied with cp -al or rsync --link-dest) is
//    refused before anything is written to it: locking it would lock the other folder too;
//  - `rm run.lock` during a run: the run checks after every step and before each checkpoint
//    commit or deletion that the path is still its file, and takes a new one back if it is
//    gone; a second run that locked the new file first sees the live run still holding the
//    deleted one and is refused. If the live run finds the new file held by another process,
//    it stops at once and writes nothing more (FolderLost).
#pragma once

#include <sys/types.h>

#include <filesystem>

namespace loom {

inline constexpr const char* kRunLockFile = "run.lock";

class RunFolderLock {
 public:
  // Creates run_dir when missing, then locks it or throws a usage Failure naming the holder.
  // Registers the writer check (base/writer_guard.hpp) until destroyed.
  explicit RunFolderLock(const std::filesystem::path& run_dir);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

  // Throws FolderLost unless the lock file at the path is still the one this process locked
  // (taking a deleted one's place back first).
  void verify();

 private:
  // Locks the file at path_ and names this process in it; false when another process holds it.
  bool take(int fd);
  std::filesystem::path run_dir_, path_;
  int fd_ = -1;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

}  // namespace loom
