// checkpoint_manager.hpp: when to save, how a save becomes atomic, which checkpoint to resume.
//
// A save writes into <dir>/step-N.tmp/ through the backend, fsyncs the files, writes
// index.json (sizes and checksums), and renames the directory to <dir>/step-N. A crash at any
// moment leaves either the previous checkpoints untouched or a .tmp directory that is not a
// checkpoint. With async, the tensors are copied at the step boundary and a background thread
// writes them while training goes on; at most one save is in flight.
//
// A sharded run (sharded_checkpoint.hpp) saves in parallel: every rank writes its own part
// into <dir>/step-N.tmp/rank-<R>/ and reports through the run's c10d store; rank 0 commits
// the index only when every rank reported success, so a rank that dies mid-save leaves the
// previous checkpoints as they were.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "abi/checkpoint_backend.hpp"
#include "abi/registry.hpp"
#include "checkpoint/checkpoint_settings.hpp"
#include "checkpoint/row_parts.hpp"
#include "checkpoint/snapshot.hpp"
#include "dist/communicator.hpp"

namespace loom {

class CheckpointManager {
 public:
  // registry: to read checkpoints another backend wrote (the index names it).
  CheckpointManager(const CheckpointSettings& settings, CheckpointBackendInstance& backend, const Registry& registry,
                    const std::filesystem::path& run_dir);
  ~CheckpointManager();  // waits for a save in flight (errors are logged)
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // The checkpoint to resume as settings.resume says, warning about each invalid one skipped.
  std::optional<std::filesystem::path> find_resume();
  // The newest valid checkpoint in the directory, whatever settings.resume says.
  std::optional<std::filesystem::path> find_latest();
  // With a window: tables split by rows come back as that rank's rows (row_parts.hpp).
  LoadedCheckpoint load(const std::filesystem::path& checkpoint, std::optional<RowWindow> window = std::nullopt);

  // Whether the interval asks for a save after this step.
  bool due(int64_t step) const { return settings_.every > 0 && step % settings_.every == 0; }
  // Saves (in the background when async); waits first for the previous save.
  void save(Snapshot snapshot);
  // Sharded: every rank calls this at the same step with its part (train/run_state.hpp
  // capture_shard_part). Rank 0 gives up after `timeout` without every rank's report.
  // part_dir: where in the checkpoint this rank's part goes; "" for rank-<comm rank>.
  void save_part(Snapshot part, Communicator& comm, std::chrono::milliseconds timeout, std::string part_dir = "");
  // Waits for the save in flight and rethrows its failure.
  void wait();
  // The step of the latest save started (it may still be in flight).
  int64_t last_saved_step() const { return last_saved_step_; }

 private:
  void write(const Snapshot& snapshot);  // the whole atomic commit, on either thread
  void write_part(const Snapshot& part, Communicator& comm, std::chrono::milliseconds timeout,
                  const std::string& report_key, const std::string& part_dir);
  // Starts work on the writer thread (async saves); a failure waits for wait() to rethrow it.
  void write_in_background(std::function<void()> work);
  std::filesystem::path fresh_tmp_dir(int64_t step);  // removes a crashed save's debris
  // Runs fill (which writes the files into tmp_dir), then the index and the rename.
  void commit(const std::filesystem::path& tmp_dir, int64_t step, const std::function<void()>& fill);
  void rotate();

  CheckpointSettings settings_;
  CheckpointBackendInstance& backend_;
  const Registry& registry_;
  std::filesystem::path dir_;
  std::thread writer_;
  std::exception_ptr failure_;
  int64_t last_saved_step_ = -1;
  int64_t parts_saved_ = 0;  // sharded saves so far: the same count on every rank
};

// The newest valid checkpoint (step-N folder) in dir, warning about each invalid one skipped.
std::optional<std::filesystem::path> newest_valid_checkpoint(const std::filesystem::path& dir, bool quiet = false);


}  // namespace loom
