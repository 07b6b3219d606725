#include "checkpoint/checkpoint_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "base/cpu_threads.hpp"
#include "base/failure.hpp"
#include "base/writer_guard.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// Newest first: every directory named step-N (committed or not) under dir.
std::vector<std::pair<int64_t, fs::path>> step_dirs(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (auto step = checkpoint_step_of(entry.path()); step && entry.is_directory()) out.emplace_back(*step, entry.path());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// Test support: LOOM_TEST_SAVE_DELAY_MS widens the window between writing the files and
// committing the index, so crash tests can kill a run in the middle of a save.
void test_delay() {
  if (const char* ms = std::getenv("LOOM_TEST_SAVE_DELAY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(ms)));
}

}  // namespace

CheckpointManager::CheckpointManager(const CheckpointSettings& settings, CheckpointBackendInstance& backend,
                                     const Registry& registry, const fs::path& run_dir)
    : settings_(settings), backend_(backend), registry_(registry), dir_(fs::path(settings.dir).is_absolute() ? fs::path(settings.dir)
                                                                                       : run_dir / settings.dir) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw runtime_failure(dir_.string() + ": cannot create the checkpoint directory: " + ec.message());
}

CheckpointManager::~CheckpointManager() {
  try {
    wait();
  } catch (const std::exception& e) {
    spdlog::error("checkpoint save failed: {}", e.what());
  }
}

std::optional<fs::path> CheckpointManager::find_resume() {
  if (settings_.resume == "none") {
    for (const auto& [step, path] : step_dirs(dir_)) {
      std::string why;
      if (verify_checkpoint(path, &why))
        throw usage_failure(dir_.string() + " already holds checkpoints (" + path.filename().string() +
                            "); resume = \"none\" would overwrite them. Use resume = \"auto\" to continue, or "
                            "another run.name for a fresh run");
    }
    return std::nullopt;
  }
  if (settings_.resume != "auto") {
    const fs::path explicit_path(settings_.resume);
    std::string why;
    if (!verify_checkpoint(explicit_path, &why))
      throw usage_failure(explicit_path.string() + ": [checkpoint] resume names an invalid checkpoint: " + why);
    return explicit_path;
  }
  return find_latest();
}

std::optional<fs::path> CheckpointManager::find_latest() { return newest_valid_checkpoint(dir_); }

std::optional<fs::path> newest_valid_checkpoint(const fs::path& dir, bool quiet) {
  for (const auto& [step, path] : step_dirs(dir)) {
    std::string why;
    if (verify_checkpoint(path, &why)) return path;
    if (!quiet) spdlog::warn("skipping {}: not a valid checkpoint: {}", path.string(), why);
  }
  return std::nullopt;
}

LoadedCheckpoint CheckpointManager::load(const fs::path& checkpoint, std::optional<RowWindow> window) {
  const CheckpointBackendRecord record = read_checkpoint_backend(checkpoint);
  if (record.use == backend_.component().name) return read_checkpoint(backend_, checkpoint, window);
  // Written by another backend (the manifest swapped it): read with that one, write with ours.
  auto reader = open_backend(record, registry_, checkpoint);
  spdlog::info("reading {} with backend {} (it wrote it); new checkpoints use {}", checkpoint.string(), record.use,
               backend_.component().name);
  return read_checkpoint(*reader, checkpoint, window);
}

void CheckpointManager::save(Snapshot snapshot) {
  wait();
  last_saved_step_ = snapshot.step;
  if (!settings_.async) {
    write(snapshot);
    return;
  }
  write_in_background([this, s = std::move(snapshot)] { write(s); });
}

void CheckpointManager::write_in_background(std::function<void()> work) {
  writer_ = std::thread([this, work = std::move(work)] {
    enter_background_thread();  // serial and at low priority: the step keeps its cores
    try {
      work();
    } catch (...) {
      failure_ = std::current_exception();  // read by wait() after join
    }
  });
}

void CheckpointManager::wait() {
  if (writer_.joinable()) writer_.join();
  if (failure_) {
    std::exception_ptr failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
}

void CheckpointManager::save_part(Snapshot part, Communicator& comm, std::chrono::milliseconds timeout,
                                  std::string part_dir) {
  wait();
  if (part_dir.empty()) part_dir = rank_folder_name(comm.rank());
  last_saved_step_ = part.step;
  if (comm.rank() == 0) fresh_tmp_dir(part.step);
  at::Tensor ready = at::ones({1});
  comm.allreduce_sum(ready);  // every rank writes into the folder rank 0 just made
  const std::string report_key = "loom/checkpoint/" + std::to_string(++parts_saved_) + "/rank-";
  if (!settings_.async) {
    write_part(part, comm, timeout, report_key, part_dir);
    return;
  }
  write_in_background([this, s = std::move(part), &comm, timeout, report_key, part_dir] {
    write_part(s, comm, timeout, report_key, part_dir);
  });
}

void CheckpointManager::write_part(const Snapshot& part, Communicator& comm, std::chrono::milliseconds timeout,
                                   const std::string& report_key, const std::string& part_dir) {
  const auto started = std::chrono::steady_clock::now();
  const fs::path tmp_dir = dir_ / ("step-" + std::to_string(part.step) + ".tmp");
  const auto write_mine = [&] {
    try {
      const fs::path mine = tmp_dir / part_dir;
      std::error_code ec;  // several ranks may make the same parent at once
      fs::create_directories(mine.parent_path(), ec);
      fs::create_directory(mine);
      backend_.save(mine.string(), part.tensors, part.metadata_json);
      test_delay();
    } catch (const std::exception& e) {
      comm.store_set(report_key + std::to_string(comm.rank()), std::string("failed: ") + e.what());
      throw;
    }
    comm.store_set(report_key + std::to_string(comm.rank()), "ok");
  };
  if (comm.rank() != 0) {
    write_mine();
    return;
  }
  commit(tmp_dir, part.step, [&] {
    write_mine();
    std::vector<std::string> keys;
    for (int r = 0; r < comm.world_size(); ++r) keys.push_back(report_key + std::to_string(r));
    std::vector<std::string> reports;
    try {
      reports = comm.store_wait(keys, timeout);
    } catch (const Failure&) {
      throw runtime_failure("checkpoint at step " + std::to_string(part.step) + ": not every rank reported its part within " +
                            std::to_string(timeout.count() / 1000) + " s; the previous checkpoints are untouched");
    }
    for (int r = 0; r < comm.world_size(); ++r)
      if (reports[static_cast<size_t>(r)] != "ok")
        throw runtime_failure("checkpoint at step " + std::to_string(part.step) + ": rank " + std::to_string(r) +
                              " could not write its part (" + reports[static_cast<size_t>(r)] + ")");
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("saved {} from {} ranks ({:.2f} s)", (dir_ / ("step-" + std::to_string(part.step))).string(),
               comm.world_size(), seconds);
  rotate();
}

fs::path CheckpointManager::fresh_tmp_dir(int64_t step) {
  check_still_writer();  // the debris below may be another run's save in progress otherwise
  const fs::path tmp_dir = dir_ / ("step-" + std::to_string(step) + ".tmp");
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);  // debris of a save that crashed at this very step
  if (!fs::create_directory(tmp_dir, ec) || ec)
    throw runtime_failure(tmp_dir.string() + ": cannot create: " + (ec ? ec.message() : "exists") +
                          "; check that the checkpoint directory is writable and has space");
  return tmp_dir;
}

void CheckpointManager::write(const Snapshot& snapshot) {
  const auto started = std::chrono::steady_clock::now();
  const fs::path tmp_dir = fresh_tmp_dir(snapshot.step);
  commit(tmp_dir, snapshot.step, [&] {
    backend_.save(tmp_dir.string(), snapshot.tensors, snapshot.metadata_json);
    test_delay();
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("saved {} ({:.2f} s)", (dir_ / ("step-" + std::to_string(snapshot.step))).string(), seconds);
  rotate();
}

void CheckpointManager::commit(const fs::path& tmp_dir, int64_t step, const std::function<void()>& fill) {
  const fs::path final_dir = dir_ / ("step-" + std::to_string(step));
  std::error_code ec;
  try {
    fill();
    write_checkpoint_index(tmp_dir, step, {backend_.component().name, backend_.config().values});
    check_still_writer();
    if (fs::exists(final_dir)) {
      // Only a run that resumed from an earlier step gets here; the old one is replaced.
      const fs::path old_dir = dir_ / ("step-" + std::to_string(step) + ".old");
      fs::remove_all(old_dir);
      fs::rename(final_dir, old_dir);
      fs::rename(tmp_dir, final_dir);
      fs::remove_all(old_dir);
    } else {
      fs::rename(tmp_dir, final_dir);
    }
    fsync_path(dir_);
  } catch (const FolderLost&) {
    throw;  // the folder is another run's now: its files, this tmp_dir's name included, are not ours to touch
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp_dir, ec);
    throw runtime_failure(std::string("checkpoint at step ") + std::to_string(step) + ": " + e.what());
  } catch (...) {
    fs::remove_all(tmp_dir, ec);  // the previous checkpoints stay as they were
    throw;
  }
}

void CheckpointManager::rotate() {
  check_still_writer();
  int64_t newer = 0;  // committed checkpoints newer than the one looked at
  for (const auto& [step, path] : step_dirs(dir_)) {
    if (!fs::exists(path / kCheckpointIndexName)) continue;  // not ours to delete
    const bool newest = newer++ < settings_.keep;
    const bool milestone = settings_.keep_every > 0 && step % settings_.keep_every == 0;
    if (newest || milestone) continue;
    // Renamed first, then deleted: a reader (host eval) sees the whole checkpoint or none, and
    // a reader that loses it finds the folder gone rather than half of it (host eval then reads
    // the newest: read_surviving_rotation in train/evaluate_checkpoint.cpp).
    std::error_code ec;
    const fs::path doomed = path.string() + ".removed";
    fs::remove_all(doomed, ec);
    fs::rename(path, doomed, ec);
    if (!ec) fs::remove_all(doomed, ec);
    if (ec) spdlog::warn("could not delete old checkpoint {}: {}", path.string(), ec.message());
  }
}

}  // namespace loom
