// plan.hpp: turns a manifest into a RunPlan (train/run_plan.hpp): the host tables into their
// settings, and each slot into the chosen component with its validated options.
#pragma once

#include <functional>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "abi/plugin_loader.hpp"
#include "abi/registry.hpp"
#include "config/manifest.hpp"
#include "train/run_plan.hpp"

namespace loom {

// A manifest slot: the table that picks a component of one kind, and where it goes in the plan.
struct SlotDef {
  const char* key;          // manifest table: "model", "trackers", "eval_data"
  loom_kind kind;
  const char* when_absent;  // component taken when the table is absent; nullptr: the table is
                            // required; "": the slot stays empty (no hooks, no checkpoints)
  const char* use_default;  // component taken when the table has no `use`; nullptr: use required
  SlotConfig RunPlan::*one = nullptr;               // a single table ([model]) fills this, or
  std::vector<SlotConfig> RunPlan::*many = nullptr;  // an array of tables ([[trackers]]) this
  // Host-side options that share the table with the component's own (a host table's specs),
  // and the step that moves their values out of the slot into the plan. Empty: none.
  std::vector<OptionSpec> host_options;
  std::function<void(RunPlan&, SlotConfig&, const toml::table&)> take_host_options;
};

// Every slot, in manifest order: one per kind (abi/kinds.hpp), plus [eval_data], a second dataset.
const std::vector<SlotDef>& manifest_slots();

// The top-level tables a manifest may hold: extends, plugins, the host tables and the slots.
std::vector<std::string> manifest_tables();

// [plugins] paths, made absolute relative to the manifest's folder.
std::vector<PluginDir> manifest_plugin_dirs(const Manifest& manifest);

// Throws a usage Failure naming file:line:col for anything that does not resolve.
// errors == nullptr: throws the first usage Failure (`host run`). Otherwise every table is
// tried and each usage problem appended there, then the cross-section checks (`host validate`
// reports them all in one pass); the plan is complete only when none was found.
RunPlan resolve_plan(const Manifest& manifest, const Registry& registry, std::vector<std::string>* errors = nullptr);

}  // namespace loom
