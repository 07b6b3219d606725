// tracker_driver.cpp: the stand-in host API behind TrackerDriver.
#include "tracker_driver.hpp"

#include <dlfcn.h>

#include <cstring>
#include <stdexcept>

// The opaque ABI types, as this stand-in host defines them.
struct loom_status {
  loom_status_code code;
  std::string message;
};
struct loom_config {
  std::map<std::string, std::string> values;  // option name -> value text
};
struct loom_registry {
  std::vector<const loom_component*> components;
};

namespace loom_test {
namespace {

loom_status* status_create(loom_status_code code, const char* message) {
  return new loom_status{code, message ? message : ""};
}
void status_destroy(loom_status* s) { delete s; }
loom_status_code status_get_code(const loom_status* s) { return s->code; }
const char* status_get_message(const loom_status* s) { return s->message.c_str(); }
void host_log_line(loom_log_level level, const char* source, const char* message) {
  if (level >= LOOM_LOG_LEVEL_WARN) host_log().push_back(std::string(source) + ": " + message);
}
loom_status* add_component(loom_registry* r, const loom_component* c) {
  r->components.push_back(c);
  return nullptr;
}
const std::string* find(const loom_config* c, const char* key) {
  const auto it = c->values.find(key);
  return it == c->values.end() ? nullptr : &it->second;
}
loom_status* missing(const char* key) {
  return status_create(LOOM_STATUS_CODE_NOT_FOUND, (std::string("no option ") + key).c_str());
}
loom_status* get_int(const loom_config* c, const char* key, int64_t* out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = std::stoll(*v);
  return nullptr;
}
loom_status* get_float(const loom_config* c, const char* key, double* out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = std::stod(*v);
  return nullptr;
}
loom_status* get_bool(const loom_config* c, const char* key, int32_t* out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = *v == "true";
  return nullptr;
}
loom_status* get_string(const loom_config* c, const char* key, const char** out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = v->c_str();
  return nullptr;
}
int32_t has(const loom_config* c, const char* key) { return find(c, key) != nullptr; }

const loom_host_api* host_api() {
  static const loom_host_api api = [] {
    loom_host_api a{};
    a.struct_size = sizeof(loom_host_api);
    a.abi_major = LOOM_ABI_MAJOR;
    a.abi_minor = LOOM_ABI_MINOR;
    a.status_create = status_create;
    a.status_destroy = status_destroy;
    a.status_get_code = status_get_code;
    a.status_get_message = status_get_message;
    a.log = host_log_line;
    a.registry_add_component = add_component;
    a.config_get_int = get_int;
    a.config_get_float = get_float;
    a.config_get_bool = get_bool;
    a.config_get_string = get_string;
    a.config_has = has;
    return a;
  }();
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
