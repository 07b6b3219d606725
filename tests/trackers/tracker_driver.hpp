// tracker_driver.hpp: drives one real tracker plugin file through its C vtable, in process,
// with a small stand-in for the host API. Tests script exact call sequences (a metric first
// seen late, a resume to an earlier step, a restart with no checkpoint) without training.
// The plugin is loaded as the host loads it (dlopen RTLD_NOW | RTLD_LOCAL, loom_plugin_init,
// register_components) and never unloaded.
#pragma once

#include <loom/abi.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace loom_test {

using MetricValues = std::vector<std::pair<std::string, double>>;

class TrackerDriver {
 public:
  // component: "jsonl", "csv", "tensorboard", loaded from LOOM_PLUGIN_DIR/<component>.so.
  // options override the component's declared defaults. Throws std::runtime_error with the
  // plugin's message when create fails.
  TrackerDriver(const std::string& component, const std::string& run_dir,
                const std::map<std::string, std::string>& options = {}, int rank = 0);
  ~TrackerDriver();  // the vtable's destroy: flush and close
  TrackerDriver(const TrackerDriver&) = delete;
  TrackerDriver& operator=(const TrackerDriver&) = delete;

  // Each throws std::runtime_error with the plugin's message when the call returns a status.
  void log(int64_t step, const MetricValues& metrics);
  void resume(int64_t step);
  void note(const std::string& text);

 private:
  const loom_tracker_vtable* vt_ = nullptr;
  loom_tracker* tracker_ = nullptr;
};

// Warnings and errors the plugins logged through the stand-in host, oldest first.
std::vector<std::string>& host_log();

}  // namespace loom_test
