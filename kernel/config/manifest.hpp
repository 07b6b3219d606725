// manifest.hpp: reads a TOML manifest, follows `extends`, applies --set overrides, and checks
// the top-level tables. Every node keeps its source (file:line:col) for messages.
#pragma once

#include <filesystem>
#include <string>
#include <toml++/toml.h>
#include <vector>

namespace loom {

struct Manifest {
  std::filesystem::path path;  // as the user gave it
  toml::table root;            // after extends and overrides
};

// Throws a usage Failure for a missing file, a TOML syntax error, an extends cycle, a bad
// --set, or an unknown top-level table.
Manifest load_manifest(const std::filesystem::path& path, const std::vector<std::string>& overrides);

}  // namespace loom
