// run_folder.hpp: the rules that keep an earlier run's outputs safe, and the run's status file.
// Every start writes <run dir>/status.json ("running"; at the end "finished", "interrupted" or
// "failed" with the error), so a later start knows what the folder holds:
//   - a run with a checkpoint to resume from continues (the checkpoint manager decides);
//   - a finished run's outputs (metrics files, exports, traces) are never started over without
//     --overwrite; neither are outputs of unknown origin (a folder without status.json);
//   - an attempt that did not finish (killed, failed, interrupted before its first checkpoint)
//     is started again from step 0 with a warning: its trackers replace what it logged, which
//     is what a scheduler that requeues the same command needs.
#pragma once

#include <filesystem>
#include <string>

#include "train/run_plan.hpp"

namespace loom {

inline constexpr const char* kRunStatusFile = "status.json";

// Throws a usage Failure naming what would be overwritten, as the rules above say. Call before
// anything is written into run_dir.
void check_run_folder(const std::filesystem::path& run_dir, const RunPlan& plan, bool overwrite);

// Now in UTC, as status.json and run.lock record it: 2026-11-26T08:36:16Z.
std::string utc_timestamp();

// Writes status.json atomically: "running" at the start, then "finished", "interrupted" or
// "failed" (message: the error line). Best effort: a status that cannot be written is a warning.
void write_run_status(const std::filesystem::path& run_dir, const std::string& status, const std::string& message = "");

}  // namespace loom
