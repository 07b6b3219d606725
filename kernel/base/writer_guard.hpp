// writer_guard.hpp: "is this process still the one writer of its run folder?", asked where a
// lost lock would do harm: after every training step, before a checkpoint is committed and
// before old ones are deleted. cli/run_lock.cpp registers the check for the rank that holds the
// folder's lock; elsewhere (other ranks, host eval, tests) there is none and asking is free.
#pragma once

#include <functional>
#include <string>

#include "base/failure.hpp"

namespace loom {

// This process no longer owns its run folder (its lock file was deleted and another process
// locked the new one): nothing more may be written there, not even the failure.
class FolderLost : public Failure {
 public:
  explicit FolderLost(const std::string& message) : Failure(ExitCode::runtime, message) {}
};

// Registers the check (it throws FolderLost when the folder is lost); an empty function clears it.
void set_writer_check(std::function<void()> check);

// Runs the registered check, if any. Thread-safe (the checkpoint writer thread asks too).
void check_still_writer();

}  // namespace loom
