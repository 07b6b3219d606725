#include "config/cross_checks.hpp"

#include <unistd.h>

#include <filesystem>
#include <optional>

#include "config/options.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

std::optional<int64_t> int_option(const SlotConfig& slot, const std::string& name) {
  if (slot.component == nullptr) return std::nullopt;
  const auto it = slot.config.values.find(name);
  if (it == slot.config.values.end()) return std::nullopt;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  return std::nullopt;
}

// "m.toml:7:11" for manifest key table.key, or "[table]" when the default was taken.
std::string where(const Manifest& manifest, const std::string& table, const std::string& key) {
  if (const toml::node* node = manifest.root.at_path(table + "." + key).node()) return source_position(*node);
  if (const toml::node* node = manifest.root.get(table)) return source_position(*node);
  return manifest.path.string();
}

// The parallel axes above 1 that offload does not combine with yet, as "tensor_parallel = 2";
// empty when offload is off or there are none.
std::string axes_without_offload(const DistributedSettings& d) {
  if (d.offload == "none") return {};
  std::string out;
  for (const auto& [name, size] : {std::pair<const char*, int64_t>{"tensor_parallel", d.tensor_parallel},
                                   {"sequence_parallel", d.sequence_parallel},
                                   {"context_parallel", d.context_parallel},
                                   {"expert_parallel", d.expert_parallel},
                                   {"pipeline_parallel", d.pipeline_parallel}})
    if (size > 1) out += (out.empty() ? "" : ", ") + std::string(name) + " = " + std::to_string(size);
  return out;
}

// The nearest folder of path that exists, for a run folder that is not made yet.
fs::path existing_ancestor(fs::path path) {
  std::error_code ec;
  path = fs::absolute(path, ec);
  while (!path.empty() && !fs::exists(path, ec) && path != path.root_path()) path = path.parent_path();
  return path;
}

}  // namespace

std::vector<std::string> cross_section_problems(const RunPlan& plan, const Manifest& manifest) {
  std::vector<std::string> out;
  const auto data_len = int_option(plan.data, "seq_len");
  const auto model_len = int_option(plan.model, "seq_len");
  if (data_len && model_len && *model_len > 0 && *data_len > *model_len)
    out.push_back(where(manifest, "data", "seq_len") + ": [data] seq_len = " + std::to_string(*data_len) +
                  " is longer than [model] seq_len = " + std::to_string(*model_len) +
                  " (the longest input the model takes); lower data.seq_len or raise model.seq_len");
  const auto batch = int_option(plan.data, "batch_size");
  if (batch && *batch > 0 && plan.run.global_batch_size > 0 && plan.run.global_batch_size % *batch != 0)
    out.push_back(where(manifest, "run", "global_batch_size") + ": [run] global_batch_size = " +
                  std::to_string(plan.run.global_batch_size) + " is not a multiple of [data] batch_size = " +
                  std::to_string(*batch) + ", so no number of ranks and accumulation steps makes it; pick a multiple");
  if (const std::string axes = axes_without_offload(plan.distributed); !axes.empty())
    out.push_back(where(manifest, "distributed", "offload") + ": [distributed] offload = \"" + plan.distributed.offload +
                  "\" with " + axes + " is not built yet (their gathers expect the optimizer state on the device); "
                  "remove offload, or set them to 1");
  // A run folder's manifest.toml lists every option at its value, so the default is not refused.
  if (plan.distributed.offload == "none" && plan.distributed.offload_piece_mb != DistributedSettings{}.offload_piece_mb)
    out.push_back(where(manifest, "distributed", "offload_piece_mb") + ": [distributed] offload_piece_mb does nothing "
                  "without offload = \"optimizer\"; remove it, or set offload");
  const fs::path run_dir = fs::path(plan.run.dir) / plan.run.name;
  std::error_code ec;
  if (fs::exists(run_dir, ec) && !fs::is_directory(run_dir, ec)) {
    out.push_back(where(manifest, "run", "name") + ": the run folder " + run_dir.string() +
                  " is a file; choose another run.name or run.dir");
  } else {
    const fs::path parent = existing_ancestor(run_dir);
    if (!fs::is_directory(parent, ec) || ::access(parent.c_str(), W_OK | X_OK) != 0)
      out.push_back(where(manifest, "run", "dir") + ": the run folder " + run_dir.string() + " cannot be written (" +
                    parent.string() + " is not a writable folder); choose another run.dir");
  }
  return out;
}

}  // namespace loom
