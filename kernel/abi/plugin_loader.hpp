// plugin_loader.hpp: finds plugin files, loads them (RTLD_NOW | RTLD_LOCAL), negotiates the
// ABI version and torch fingerprint, and lets each plugin register its components.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "abi/registry.hpp"

namespace loom {

struct PluginDir {
  std::filesystem::path path;
  std::string origin;  // "manifest.toml:3:9", "LOOM_PLUGIN_PATH" or "default"
};

// Search order: manifest [plugins] paths, then LOOM_PLUGIN_PATH (':'-separated), then the
// default directory beside the binary (../lib/loom/plugins). Missing manifest directories are
// usage errors; missing others are skipped.
std::vector<PluginDir> plugin_search_path(const std::vector<PluginDir>& manifest_dirs);

// Loads every *.so in dirs into registry. keep_going: record failures in the registry and
// continue (for `host plugins`); otherwise throw the first as a plugin Failure.
void load_plugins(Registry& registry, const std::vector<PluginDir>& dirs, bool keep_going);

// For commands that run a manifest: every plugin file is tried, and one that cannot be loaded
// (ABI, fingerprint, missing symbol) stops nothing by itself; it is returned, so that the caller
// names it when the manifest needs a component that no loaded plugin offers, and warns about it
// otherwise. Two files registering one component name are still refused (a plugin Failure).
std::vector<const PluginRecord*> load_plugins_for_manifest(Registry& registry, const std::vector<PluginDir>& dirs);

}  // namespace loom
