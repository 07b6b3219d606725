#include "abi/plugin_loader.hpp"

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "base/failure.hpp"
#include "abi/host_api.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// Plugins stay loaded until the process exits: anything they created may still be alive
// (tensors, static destructors), so unloading earlier is never safe. Deliberately leaked.
std::vector<boost::dll::shared_library>& loaded_libraries() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}

std::string version_text(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

void load_one(Registry& registry, PluginRecord& record) {
  boost::dll::shared_library library;
  boost::dll::fs::error_code ec;
  dlerror();  // clear, so the message below is this load's
  library.load(record.path, ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (ec) {
    const char* why = dlerror();
    throw plugin_failure(record.path + ": cannot load plugin: " + (why ? why : ec.message()) +
                         "; rebuild it against this SDK or remove it from the plugin path");
  }
  if (!library.has(LOOM_PLUGIN_ENTRY_SYMBOL))
    throw plugin_failure(record.path + ": not a Loom plugin (no " LOOM_PLUGIN_ENTRY_SYMBOL
                                       " symbol); remove it from the plugin path");
  auto init = library.get<const loom_plugin_info*(const loom_host_api*)>(LOOM_PLUGIN_ENTRY_SYMBOL);
  loaded_libraries().push_back(library);

  const loom_plugin_info* raw = init(host_api());
  if (raw == nullptr || raw->struct_size < offsetof(loom_plugin_info, name))
    throw plugin_failure(record.path + ": " LOOM_PLUGIN_ENTRY_SYMBOL " returned no valid plugin info");
  record.abi_major = raw->abi_major;
  record.abi_minor = raw->abi_minor;
  if (raw->abi_major != LOOM_ABI_MAJOR)
    throw plugin_failure(record.path + ": plugin ABI " + version_text(raw->abi_major, raw->abi_minor) +
                         " is incompatible with host ABI " + version_text(LOOM_ABI_MAJOR, LOOM_ABI_MINOR) +
                         " (major versions differ); rebuild the plugin against Loom SDK " +
                         std::to_string(LOOM_ABI_MAJOR) + ".x");
  if (!LOOM_STRUCT_HAS(raw, loom_plugin_info, register_components) || raw->register_components == nullptr)
    throw plugin_failure(record.path + ": plugin info lacks register_components");
  record.name = raw->name ? raw->name : fs::path(record.path).stem().string();
  record.version = raw->version ? raw->version : "?";
  record.fingerprint = raw->torch_fingerprint ? raw->torch_fingerprint : "";
  if (!record.fingerprint.empty() && record.fingerprint != host_torch_fingerprint())
    throw plugin_failure(record.path + ": plugin was built for \"" + record.fingerprint +
                         "\" but this host runs \"" + host_torch_fingerprint() +
                         "\"; rebuild the plugin against the host's LibTorch");

  loom_registry context{&registry, &record, std::nullopt};
  loom_status* status = raw->register_components(&context);
  const std::string message = take_status_message(status);
  if (context.failure) throw *context.failure;
  if (!message.empty()) throw plugin_failure(record.path + ": registration failed: " + message);
}

std::vector<fs::path> plugin_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".so" && entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // deterministic order, deterministic messages
  return files;
}

}  // namespace

std::vector<PluginDir> plugin_search_path(const std::vector<PluginDir>& manifest_dirs) {
  std::vector<PluginDir> dirs;
  for (const auto& d : manifest_dirs) {
    if (!fs::is_directory(d.path))
      throw usage_failure(d.origin + ": plugin directory " + d.path.string() +
                          " does not exist; fix [plugins] paths (relative paths start at the manifest's folder)");
    dirs.push_back(d);
  }
  if (const char* env = std::getenv("LOOM_PLUGIN_PATH")) {
    std::stringstream list(env);
    std::string item;
    while (std::getline(list, item, ':')) {
      if (item.empty()) continue;
      if (fs::is_directory(item)) dirs.push_back({item, "LOOM_PLUGIN_PATH"});
      else spdlog::warn("LOOM_PLUGIN_PATH names {}, which is not a directory; skipped", item);
    }
  }
  const fs::path default_dir = boost::dll::program_location().parent_path().parent_path() / "lib" / "loom" / "plugins";
  if (fs::is_directory(default_dir)) dirs.push_back({default_dir, "default"});
  return dirs;
}

void load_plugins(Registry& registry, const std::vector<PluginDir>& dirs, bool keep_going) {
  std::set<fs::path> seen;
  for (const auto& dir : dirs) {
    for (const auto& file : plugin_files(dir.path)) {
      std::error_code ec;
      const fs::path canonical = fs::weakly_canonical(file, ec);
      if (!seen.insert(ec ? file : canonical).second) continue;  // same file via two dirs
      PluginRecord& record = registry.add_plugin(PluginRecord{file.string()});
      try {
        load_one(registry, record);
      } catch (const Failure& f) {
        if (!keep_going) throw;
        record.error = f.what();
      }
    }
  }
}

std::vector<const PluginRecord*> load_plugins_for_manifest(Registry& registry, const std::vector<PluginDir>& dirs) {
  load_plugins(registry, dirs, /*keep_going=*/true);
  // Which of two files registering one name would run is a guess: always refused.
  if (!registry.duplicates().empty()) throw plugin_failure(registry.duplicates().front());
  std::vector<const PluginRecord*> broken;
  for (const PluginRecord& record : registry.plugins())
    if (!record.error.empty()) broken.push_back(&record);
  return broken;
}

}  // namespace loom
