#include "abi/registry.hpp"

#include "base/failure.hpp"

namespace loom {

std::string Component::describe() const {
  return std::string(kind_name(kind)) + " \"" + name + "\" from " + (plugin ? plugin->path : "?");
}

PluginRecord& Registry::add_plugin(PluginRecord record) {
  plugins_.push_back(std::move(record));
  return plugins_.back();
}

const Component& Registry::add_component(Component component) {
  const auto key = std::make_pair(static_cast<int>(component.kind), component.name);
  auto existing = components_.find(key);
  if (existing != components_.end()) {
    duplicates_.push_back(std::string("duplicate ") + kind_name(component.kind) + " \"" + component.name +
                          "\": registered by " + existing->second.plugin->path + " and by " +
                          component.plugin->path + "; remove one of the two files from the plugin path");
    throw plugin_failure(duplicates_.back());
  }
  return components_.emplace(key, std::move(component)).first->second;
}

const Component* Registry::lookup(loom_kind kind, const std::string& name) const {
  auto it = components_.find({static_cast<int>(kind), name});
  return it == components_.end() ? nullptr : &it->second;
}

std::vector<const Component*> Registry::named(const std::string& name) const {
  std::vector<const Component*> out;
  for (const auto& [key, c] : components_)
    if (key.second == name) out.push_back(&c);
  return out;
}

std::vector<std::string> Registry::names(loom_kind kind) const {
  std::vector<std::string> out;
  for (const auto& [key, c] : components_)
    if (key.first == static_cast<int>(kind)) out.push_back(key.second);
  return out;
}

}  // namespace loom
