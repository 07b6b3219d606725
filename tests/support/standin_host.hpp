// standin_host.hpp: the host side of the C ABI for small drivers that load one plugin without
// the kernel (tests/trackers/tracker_driver.cpp, tools/bench/token_file_bench.cpp): the opaque
// loom_status and loom_config as plain structs, options kept as text, and a host table whose
// log and registry_add_component the driver supplies. Torch-free. The driver defines
// struct loom_registry itself, holding what it wants from registration.
#pragma once

#include <loom/abi.h>

#include <map>
#include <string>

struct loom_status {
  loom_status_code code;
  std::string message;
};
struct loom_config {
  std::map<std::string, std::string> values;  // option name -> value text
};

namespace loom_standin {

inline loom_status* status_create(loom_status_code code, const char* message) {
  return new loom_status{code, message ? message : ""};
}
inline void status_destroy(loom_status* s) { delete s; }
inline loom_status_code status_get_code(const loom_status* s) { return s->code; }
inline const char* status_get_message(const loom_status* s) { return s->message.c_str(); }

inline const std::string* find(const loom_config* c, const char* key) {
  const auto it = c->values.find(key);
  return it == c->values.end() ? nullptr : &it->second;
}
inline loom_status* missing(const char* key) {
  return status_create(LOOM_STATUS_CODE_NOT_FOUND, (std::string("no option ") + key).c_str());
}
inline loom_status* get_int(const loom_config* c, const char* key, int64_t* out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = std::stoll(*v);
  return nullptr;
}
inline loom_status* get_float(const loom_config* c, const char* key, double* out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = std::stod(*v);
  return nullptr;
}
inline loom_status* get_bool(const loom_config* c, const char* key, int32_t* out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = *v == "true";
  return nullptr;
}
inline loom_status* get_string(const loom_config* c, const char* key, const char** out) {
  const std::string* v = find(c, key);
  if (!v) return missing(key);
  *out = v->c_str();
  return nullptr;
}
inline int32_t has(const loom_config* c, const char* key) { return find(c, key) != nullptr; }

using LogFn = void (*)(loom_log_level, const char*, const char*);
using AddComponentFn = loom_status* (*)(loom_registry*, const loom_component*);

// The host table: these functions plus the driver's log and registry_add_component.
inline loom_host_api host_api(LogFn log, AddComponentFn add_component) {
  loom_host_api a{};
  a.struct_size = sizeof(loom_host_api);
  a.abi_major = LOOM_ABI_MAJOR;
  a.abi_minor = LOOM_ABI_MINOR;
  a.status_create = status_create;
  a.status_destroy = status_destroy;
  a.status_get_code = status_get_code;
  a.status_get_message = status_get_message;
  a.log = log;
  a.registry_add_component = add_component;
  a.config_get_int = get_int;
  a.config_get_float = get_float;
  a.config_get_bool = get_bool;
  a.config_get_string = get_string;
  a.config_has = has;
  return a;
}

}  // namespace loom_standin
