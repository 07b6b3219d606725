// pipeline_config.hpp: turns a manifest into what the trainer needs: the [run] settings and,
// for each slot, the chosen component with its validated options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "manifest.hpp"
#include "options.hpp"
#include "plugin_loader.hpp"
#include "precision.hpp"
#include "registry.hpp"

namespace loom {

struct RunSettings {
  std::string name, dir;
  std::string device = "auto";      // resolved per rank by resolve_device (device.hpp)
  std::string device_at = "[run]";  // where the manifest set it, for error messages
  Precision precision = Precision::fp32;
  uint64_t seed = 0;
  int64_t steps = 0, grad_accum = 1, log_every = 10, threads = 0;
  bool cpu_memory_cache = true;
  bool deterministic = false;
  double clip_grad_norm = 0.0;  // 0: no clipping
  double peak_flops = 0.0;      // 0: measure
};

struct SlotConfig {
  std::string slot;                  // "model", "trackers[0]"
  const Component* component = nullptr;
  loom_config config;                // resolved options
  bool required = true;              // trackers: false (the default) turns failures into warnings
};

// [checkpoint]: the manager's own options; the backend's options go to its SlotConfig.
struct CheckpointSettings {
  bool enabled = false;              // a [checkpoint] table is present
  int64_t every = 0;                 // save every N steps; 0: only at the end and on signals
  int64_t keep = 3;                  // newest checkpoints kept
  int64_t keep_every = 0;            // steps that are multiples of this are never deleted
  bool at_end = true;
  bool async = true;
  std::string resume = "auto";       // "auto", "none" or a checkpoint directory
  std::string dir = "checkpoints";   // relative to the run directory
};

// [distributed]: how ranks talk (the ranks themselves come from the launcher's variables).
struct DistributedSettings {
  std::string backend = "auto";  // "auto", "gloo" or "nccl"
  double bucket_mb = 25;         // gradient all-reduce bucket size
  double timeout_s = 300;        // a rank that does not answer within this fails the run
};

struct PipelineConfig {
  RunSettings run;
  DistributedSettings distributed;
  CheckpointSettings checkpoint;
  SlotConfig model, data, optimizer, schedule, checkpoint_backend;
  std::optional<SlotConfig> eval_data;  // [eval_data], read when a hook requests evaluation
  int64_t eval_max_batches = 0;
  std::vector<SlotConfig> trackers, hooks;
  toml::table resolved;  // every slot with defaults filled in; written to the run directory
  const Registry* registry = nullptr;  // what resolved it; lives as long as the run
};

// The [run] table's declared options (host describe run; README reference).
const std::vector<OptionSpec>& run_options();

// The [checkpoint] table's host-side options (the backend adds its own).
const std::vector<OptionSpec>& checkpoint_options();
// Host-side options of every [[trackers]] entry and of [eval_data].
const std::vector<OptionSpec>& tracker_options();
const std::vector<OptionSpec>& eval_data_options();
const std::vector<OptionSpec>& distributed_options();

// [plugins] paths, made absolute relative to the manifest's folder.
std::vector<PluginDir> manifest_plugin_dirs(const Manifest& manifest);

// Throws a usage Failure naming file:line:col for anything that does not resolve.
PipelineConfig resolve_pipeline(const Manifest& manifest, const Registry& registry);

}  // namespace loom
