// tracker_driver.cpp: the stand-in host API behind TrackerDriver.
#include "tracker_driver.hpp"

#include "standin_host.hpp"

#include <dlfcn.h>

#include <cstring>
#include <stdexcept>

// The registry, as this stand-in host defines it; status and config come from standin_host.hpp.
struct loom_registry {
  std::vector<const loom_component*> components;
};

namespace loom_test {
namespace {

using loom_standin::status_destroy;

void host_log_line(loom_log_level level, const char* source, const char* message) {
  if (level >= LOOM_LOG_LEVEL_WARN) host_log().push_back(std::string(source) + ": " + message);
}
loom_status* add_component(loom_registry* r, const loom_component* c) {
  r->components.push_back(c);
  return nullptr;
}

const loom_host_api* host_api() {
  static const loom_host_api api = loom_standin::host_api(host_log_line, add_component);
  return &api;
}

// The tracker component of LOOM_PLUGIN_DIR/<name>.so, loaded once.
const loom_component& tracker_component(const std::string& name) {
  static std::map<std::string, const loom_component*> loaded;
  if (auto it = loaded.find(name); it != loaded.end()) return *it->second;
  const std::string file = std::string(LOOM_PLUGIN_DIR) + "/" + name + ".so";
  void* so = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (so == nullptr) throw std::runtime_error("dlopen " + file + ": " + dlerror());
  auto init = reinterpret_cast<loom_plugin_init_fn>(dlsym(so, LOOM_PLUGIN_ENTRY_SYMBOL));
  if (init == nullptr) throw std::runtime_error(file + ": no " LOOM_PLUGIN_ENTRY_SYMBOL);
  const loom_plugin_info* info = init(host_api());
  static loom_registry registry;
  const size_t before = registry.components.size();
  if (loom_status* s = info->register_components(&registry)) {
    const std::string message = s->message;
    status_destroy(s);
    throw std::runtime_error(file + ": " + message);
  }
  for (size_t i = before; i < registry.components.size(); ++i)
    if (registry.components[i]->kind == LOOM_KIND_TRACKER && name == registry.components[i]->name)
      return *(loaded[name] = registry.components[i]);
  throw std::runtime_error(file + ": no tracker named " + name);
}

void check(loom_status* s, const char* what) {
  if (s == nullptr) return;
  const std::string message = std::string(what) + ": " + s->message;
  status_destroy(s);
  throw std::runtime_error(message);
}

}  // namespace

std::vector<std::string>& host_log() {
  static std::vector<std::string> lines;
  return lines;
}

TrackerDriver::TrackerDriver(const std::string& component, const std::string& run_dir,
                             const std::map<std::string, std::string>& options, int rank) {
  const loom_component& c = tracker_component(component);
  vt_ = static_cast<const loom_tracker_vtable*>(c.vtable);
  loom_config config;
  const auto* bytes = reinterpret_cast<const unsigned char*>(c.options);
  for (size_t i = 0; i < c.option_count; ++i) {  // stride options[0].struct_size (core.h)
    const auto* spec = reinterpret_cast<const loom_option_spec*>(bytes + i * c.options[0].struct_size);
    if (spec->default_value != nullptr) config.values[spec->name] = spec->default_value;
  }
  for (const auto& [k, v] : options) config.values[k] = v;
  const loom_context context = {sizeof(loom_context), "trackers[0]", run_dir.c_str(), 0, rank, 1, "cpu", 100};
  check(vt_->create(&context, &config, &tracker_), "create");
}

TrackerDriver::~TrackerDriver() { vt_->destroy(tracker_); }

void TrackerDriver::log(int64_t step, const MetricValues& metrics) {
  std::vector<loom_metric> items;
  for (const auto& [name, value] : metrics) items.push_back({sizeof(loom_metric), name.c_str(), value});
  std::vector<const loom_metric*> pointers;
  for (const auto& m : items) pointers.push_back(&m);
  const loom_metrics in = {sizeof(loom_metrics), step, pointers.data(), pointers.size()};
  check(vt_->log(tracker_, &in), "log");
}

void TrackerDriver::resume(int64_t step) {
  if (vt_->struct_size < offsetof(loom_tracker_vtable, resume) + sizeof(vt_->resume) || vt_->resume == nullptr)
    throw std::runtime_error("this tracker has no resume callback");
  check(vt_->resume(tracker_, step), "resume");
}

void TrackerDriver::note(const std::string& text) {
  if (vt_->note != nullptr) check(vt_->note(tracker_, text.c_str()), "note");
}

}  // namespace loom_test
