#include "cli/run_folder.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <vector>

#include "base/failure.hpp"
#include "checkpoint/checkpoint_manager.hpp"
#include "cli/run_lock.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// Whether the run will continue from a checkpoint rather than start afresh (as
// CheckpointManager::find_resume will decide; an explicit path is checked there).
bool will_resume(const fs::path& run_dir, const CheckpointSettings& c) {
  if (!c.enabled || c.resume == "none") return false;
  if (c.resume != "auto") return true;
  const fs::path dir = fs::path(c.dir).is_absolute() ? fs::path(c.dir) : run_dir / c.dir;
  std::error_code ec;
  return fs::is_directory(dir, ec) && newest_valid_checkpoint(dir, /*quiet=*/true).has_value();
}

// What an earlier start left besides its manifest, status, logs and checkpoint folder.
std::vector<std::string> outputs_in(const fs::path& run_dir, const CheckpointSettings& c) {
  const fs::path checkpoints = fs::path(c.dir).lexically_normal();
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "manifest.toml" || name == kRunStatusFile || name == kRunLockFile || name == "logs" ||
        fs::path(name) == checkpoints)
      continue;
    out.push_back(name);
  }
  return out;
}

// The status an earlier start recorded; "" when there is no readable status.json.
std::string earlier_status(const fs::path& run_dir) {
  std::ifstream in(run_dir / kRunStatusFile);
  if (!in) return "";
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("status") && j["status"].is_string() ? j["status"].get<std::string>() : "";
}

}  // namespace

std::string utc_timestamp() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void check_run_folder(const fs::path& run_dir, const RunPlan& plan, bool overwrite) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec) || will_resume(run_dir, plan.checkpoint)) return;
  const std::vector<std::string> outputs = outputs_in(run_dir, plan.checkpoint);
  if (outputs.empty()) return;
  std::string listed;
  for (size_t i = 0; i < outputs.size() && i < 4; ++i) listed += (i ? ", " : "") + outputs[i];
  if (outputs.size() > 4) listed += ", ...";
  const std::string status = earlier_status(run_dir);
  if (overwrite) {
    spdlog::warn("--overwrite: starting {} afresh; the earlier run's {} are replaced", run_dir.string(), listed);
    return;
  }
  if (status == "running" || status == "failed" || status == "interrupted") {
    spdlog::warn("{} holds an earlier attempt that did not finish (status {}) and no checkpoint: starting again "
                 "from step 0; its trackers replace what it logged ({})",
                 run_dir.string(), status, listed);
    return;
  }
  throw usage_failure(run_dir.string() + " holds the outputs of " +
                      (status == "finished" ? "a finished run" : "an earlier run") + " (" + listed +
                      ") and no checkpoint to resume from; starting afresh would overwrite them. Choose another "
                      "run.name (--set run.name=...), move the folder away, or pass --overwrite to replace them");
}

void write_run_status(const fs::path& run_dir, const std::string& status, const std::string& message) {
  static const std::string started = utc_timestamp();  // this process's start
  nlohmann::json j = {{"status", status}, {"started", started}};
  if (status != "running") j["ended"] = utc_timestamp();
  if (!message.empty()) j["message"] = message;
  const fs::path tmp = run_dir / (std::string(kRunStatusFile) + ".tmp");
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) fs::rename(tmp, run_dir / kRunStatusFile, ec);
  if (ec) spdlog::warn("{}: cannot record the run's status: {}", (run_dir / kRunStatusFile).string(), ec.message());
}

}  // namespace loom
