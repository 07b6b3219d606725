// lock_holders.hpp: which processes hold a run folder's lock, read from the kernel rather than
// from the pid the lock file names (that text may be an earlier, finished run's). Linux /proc;
// where it is not readable the answers are empty and the callers fall back to the file's text.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace loom {

// A user's name ("uid N" when the system has none for it).
std::string user_name(uid_t uid);

// The pid holding an flock(2) on the file open as fd (from /proc/locks), if this machine knows.
std::optional<int> flock_holder(int fd);

// "pid 123 (user alice, host)": a live process's pid, its user and its command name.
std::string describe_process(int pid);

// Whether pid names a live process of this machine. An orphan's zombie waits for whoever
// adopted it to reap it, which a container's first process may never do; it has stopped all
// the same.
bool process_alive(int pid);

// The other processes of this machine that still have `path` open although it was deleted:
// a live run whose run.lock someone removed holds the deleted file until it takes a new one.
// Processes of other users are seen only by root.
std::vector<int> processes_holding_deleted(const std::filesystem::path& path);

}  // namespace loom
