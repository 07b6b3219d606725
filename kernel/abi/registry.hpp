// registry.hpp: every loaded plugin and every component it registered, keyed by (kind, name).
#pragma once

#include <loom/abi.h>

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "abi/kinds.hpp"
#include "abi/option_spec.hpp"

namespace loom {

struct PluginRecord;

struct Component {
  loom_kind kind = LOOM_KIND_COUNT_;
  std::string name;
  std::string summary;
  std::vector<OptionSpec> options;
  const void* vtable = nullptr;  // static in the plugin; read through copy_vtable
  const PluginRecord* plugin = nullptr;

  // "component \"adamw\" (optimizer) from /path/adamw.so" for messages.
  std::string describe() const;
};

struct PluginRecord {
  std::string path;
  std::string name, version;
  uint32_t abi_major = 0, abi_minor = 0;
  std::string fingerprint;            // empty: torch-free
  std::string error;                  // non-empty: refused or failed to load
  std::vector<const Component*> components;
};

class Registry {
 public:
  // Records a plugin; returned reference stays valid (deque).
  PluginRecord& add_plugin(PluginRecord record);
  // Throws a plugin Failure naming both files when (kind, name) exists already.
  const Component& add_component(Component component);
  // nullptr when absent.
  const Component* lookup(loom_kind kind, const std::string& name) const;
  // Every component with the given name, whatever its kind.
  std::vector<const Component*> named(const std::string& name) const;
  std::vector<std::string> names(loom_kind kind) const;
  const std::deque<PluginRecord>& plugins() const { return plugins_; }
  // One message per component name that a second file tried to register (refused).
  const std::vector<std::string>& duplicates() const { return duplicates_; }

 private:
  std::deque<PluginRecord> plugins_;
  std::vector<std::string> duplicates_;
  std::map<std::pair<int, std::string>, Component> components_;
};

// Copies a plugin's vtable into the host's struct: the known prefix only, missing tail NULL.
template <class VTable>
VTable copy_vtable(const void* source) {
  VTable vt{};
  const size_t theirs = *static_cast<const size_t*>(source);
  std::memcpy(&vt, source, theirs < sizeof(VTable) ? theirs : sizeof(VTable));
  vt.struct_size = sizeof(VTable);
  return vt;
}

}  // namespace loom
