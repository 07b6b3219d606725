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

}  // namespace loom
