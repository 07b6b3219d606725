#include "config/manifest.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "base/failure.hpp"
#include "config/options.hpp"
#include "config/plan.hpp"
#include "config/toml_guard.hpp"

namespace fs = std::filesystem;

namespace loom {

namespace {

constexpr uintmax_t kMaxManifestBytes = uintmax_t(16) << 20;

toml::table parse_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {  // ec: a name too long, a path through a file
    if (ec && ec != std::errc::no_such_file_or_directory)
      throw usage_failure(path.string().substr(0, 300) + ": cannot read the manifest: " + ec.message());
    throw usage_failure(path.string() + ": manifest not found; check the path");
  }
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > kMaxManifestBytes)
    throw usage_failure(path.string() + ": not a manifest (not a regular file, or larger than 16 MiB)");
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (const std::string unsafe = toml_unsafe_character(text); !unsafe.empty())
    throw usage_failure(path.string() + ":" + unsafe);
  try {
    return toml::parse(text, path.string());
  } catch (const toml::parse_error& e) {
    const auto& where = e.source();
    throw usage_failure(path.string() + ":" + std::to_string(where.begin.line) + ":" +
                        std::to_string(where.begin.column) + ": TOML syntax error: " +
                        std::string(e.description()) + "; fix the syntax at that position");
  }
}

// Deep merge: tables merge key by key, anything else in `over` replaces `base`. Arrays too,
// [[trackers]] and [[hooks]] included, as in Hydra and OmegaConf: a manifest that lists
// trackers says which trackers run. Because an extending file could mean to add to the base's
// list, the replacement is announced. Nodes are moved, not copied: toml++ drops the source
// position (file:line:col) on copy.
void merge_into(toml::table& base, toml::table& over, const fs::path& base_path) {
  for (auto&& [key, node] : over) {
    auto* existing = base.get(key);
    if (existing && existing->is_table() && node.is_table()) {
      merge_into(*existing->as_table(), *node.as_table(), base_path);
      continue;
    }
    if (existing && existing->is_array_of_tables() && node.is_array_of_tables() && !existing->as_array()->empty())
      spdlog::info("{}: [[{}]] replaces the {} entr{} of {} (arrays are replaced, not appended: repeat the base's "
                   "entries to keep them)",
                   source_position(node), std::string(key.str()), existing->as_array()->size(),
                   existing->as_array()->size() == 1 ? "y" : "ies", base_path.string());
    base.insert_or_assign(key, std::move(node));
  }
}

toml::table load_with_extends(const fs::path& path, std::set<fs::path>& chain) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);  // a path it cannot resolve is reported by parse_file
  if (ec) canonical = path.lexically_normal();
  if (!chain.insert(canonical).second)
    throw usage_failure(path.string() + ": extends cycle: this manifest extends itself through its bases");
  toml::table table = parse_file(path);
  if (auto* base = table.get("extends")) {
    auto base_name = base->value<std::string>();
    if (!base_name)
      throw usage_failure(source_position(*base) + ": extends must be a string path to a base manifest");
    const fs::path base_path = path.parent_path() / *base_name;
    toml::table merged = load_with_extends(base_path, chain);
    table.erase("extends");
    merge_into(merged, table, base_path);
    table = std::move(merged);
  }
  chain.erase(canonical);
  return table;
}

// --set a.b=value or --set trackers.0.path=x: value is TOML, or a bare string when not.
void apply_override(toml::table& root, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw usage_failure("--set " + text + ": expected KEY=VALUE, for example --set optimizer.lr=1e-3");
  const std::string key = text.substr(0, eq), raw = text.substr(eq + 1);
  const std::string origin = "--set " + key;
  toml::table parsed;
  if (const std::string unsafe = toml_unsafe_character(raw); !unsafe.empty())
    throw usage_failure(origin + ": " + unsafe.substr(unsafe.find(' ') + 1));  // the column is of the value
  try {
    parsed = toml::parse("value = " + raw, origin);
  } catch (const toml::parse_error&) {
    // Not TOML: take it as a bare string, parsed too so that it carries the --set origin.
    parsed = toml::parse("value = " + to_toml_text(toml::value<std::string>(raw)), origin);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 2)
    throw usage_failure("--set " + text + ": KEY needs a table and a name, for example run.steps=50");
  toml::node* cursor = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (auto* table = cursor->as_table()) {
      if (!table->contains(parts[i])) table->insert(parts[i], toml::table{});
      cursor = table->get(parts[i]);
    } else if (auto* array = cursor->as_array()) {
      size_t index = 0;
      try {
        index = std::stoul(parts[i]);
      } catch (const std::exception&) {
        throw usage_failure("--set " + text + ": \"" + parts[i] + "\" must be an index into the array");
      }
      if (index >= array->size())
        throw usage_failure("--set " + text + ": index " + parts[i] + " is past the end of the array (" +
                            std::to_string(array->size()) + " entries)");
      cursor = array->get(index);
    } else {
      throw usage_failure("--set " + text + ": \"" + parts[i - 1] + "\" is a value, not a table");
    }
  }
  auto* table = cursor->as_table();
  if (!table) throw usage_failure("--set " + text + ": the parent of \"" + parts.back() + "\" is not a table");
  table->insert_or_assign(parts.back(), std::move(*parsed.get("value")));  // moved: keeps the origin
}

}  // namespace

Manifest load_manifest(const fs::path& path, const std::vector<std::string>& overrides) {
  std::set<fs::path> chain;
  Manifest manifest{path, load_with_extends(path, chain)};
  for (const auto& text : overrides) apply_override(manifest.root, text);

  const std::vector<std::string> known = manifest_tables();
  for (const auto& [key, node] : manifest.root) {
    const std::string name(key.str());
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    throw usage_failure(source_position(key.source()) + ": unknown table [" + name + "]" + did_you_mean(name, known) +
                        " (README \"Manifest reference\" lists the tables)");
  }
  return manifest;
}

}  // namespace loom
