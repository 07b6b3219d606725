#include "abi/host_api.hpp"
#include "abi/tensor_parallel_collective.hpp"
#include "abi/param_created.hpp"
#include "abi/unit_boundary.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>

namespace loom {
namespace {

// Returned when even a status cannot be allocated; never freed.
loom_status out_of_memory{LOOM_STATUS_CODE_INTERNAL, "out of memory"};

loom_status* status_create(loom_status_code code, const char* message) {
  try {
    return new loom_status{code, message ? message : ""};
  } catch (...) {
    return &out_of_memory;
  }
}

void status_destroy(loom_status* status) {
  if (status != &out_of_memory) delete status;
}

loom_status_code status_get_code(const loom_status* s) { return s ? s->code : LOOM_STATUS_CODE_OK; }
const char* status_get_message(const loom_status* s) { return s ? s->message.c_str() : ""; }

std::atomic<int> quiet_info_scopes{0};

void log(loom_log_level level, const char* source, const char* message) {
  const char* from = source ? source : "plugin";
  if (level == LOOM_LOG_LEVEL_INFO && quiet_info_scopes.load() > 0) level = LOOM_LOG_LEVEL_DEBUG;
  switch (level) {
    case LOOM_LOG_LEVEL_DEBUG: spdlog::debug("{}: {}", from, message); break;
    case LOOM_LOG_LEVEL_INFO: spdlog::info("{}: {}", from, message); break;
    case LOOM_LOG_LEVEL_WARN: spdlog::warn("{}: {}", from, message); break;
    default: spdlog::error("{}: {}", from, message); break;
  }
}

Component read_component(const loom_component* c, const PluginRecord& plugin) {
  const std::string from = " in " + plugin.path;
  if (c == nullptr || !LOOM_STRUCT_HAS(c, loom_component, vtable))
    throw plugin_failure("component descriptor is NULL or too small" + from);
  Component out;
  out.kind = c->kind;
  out.name = c->name ? c->name : "";
  out.summary = c->summary ? c->summary : "";
  out.vtable = c->vtable;
  out.plugin = &plugin;
  if (out.kind < 0 || out.kind >= LOOM_KIND_COUNT_)
    throw plugin_failure("component \"" + out.name + "\" has unknown kind " + std::to_string(out.kind) + from);
  if (!is_lower_snake_case(out.name))
    throw plugin_failure("component name \"" + out.name + "\" must be lower_snake_case" + from);
  if (kind_needs_torch(out.kind) && plugin.fingerprint.empty())
    throw plugin_failure(out.describe() + " is torch-linked, but the plugin declares no torch fingerprint; "
                         "build it with loom_add_plugin(... TORCH) and include <loom/torch.hpp>");
  if (out.vtable == nullptr) throw plugin_failure(out.describe() + " has no vtable");
  const size_t vt_size = *static_cast<const size_t*>(out.vtable);
  for (size_t offset : kind_info(out.kind).required_callbacks) {
    void* fn = nullptr;
    if (offset + sizeof(fn) <= vt_size) std::memcpy(&fn, static_cast<const char*>(out.vtable) + offset, sizeof(fn));
    if (fn == nullptr)
      throw plugin_failure(out.describe() + " lacks a required callback (vtable struct_size " +
                           std::to_string(vt_size) + "); see " + kind_info(out.kind).header);
  }
  if (c->options != nullptr && c->option_count > 0) {
    const size_t stride = c->options[0].struct_size;
    if (stride < offsetof(loom_option_spec, doc) + sizeof(const char*))
      throw plugin_failure(out.describe() + ": option specs have an invalid struct_size");
    for (size_t i = 0; i < c->option_count; ++i) {
      loom_option_spec spec{};
      std::memcpy(&spec, reinterpret_cast<const char*>(c->options) + i * stride,
                  std::min(stride, sizeof(spec)));
      OptionSpec o;
      o.name = spec.name ? spec.name : "";
      o.type = spec.type;
      if (spec.default_value) o.default_text = spec.default_value;
      o.required = spec.required != 0;
      o.doc = spec.doc ? spec.doc : "";
      if (o.name.empty() || o.type < LOOM_OPTION_TYPE_INT || o.type > LOOM_OPTION_TYPE_STRING || o.name == "use")
        throw plugin_failure(out.describe() + ": option " + std::to_string(i) + " has no name, the reserved "
                             "name \"use\", or an unknown type");
      if (o.default_text && !o.required) {
        try {
          parse_default(o);
        } catch (const std::exception&) {
          throw plugin_failure(out.describe() + ": default \"" + *o.default_text + "\" of option \"" + o.name +
                               "\" is not a valid " + option_type_name(o.type));
        }
      }
      out.options.push_back(std::move(o));
    }
  }
  return out;
}

loom_status* registry_add_component(loom_registry* r, const loom_component* c) {
  // No exception may unwind through the plugin's frames (it may be C): store and report later.
  try {
    const Component& added = r->registry->add_component(read_component(c, *r->plugin));
    r->plugin->components.push_back(&added);
    return nullptr;
  } catch (const Failure& f) {
    if (!r->failure) r->failure = f;
    return status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, f.what());
  } catch (const std::exception& e) {
    if (!r->failure) r->failure = plugin_failure(e.what());
    return status_create(LOOM_STATUS_CODE_INTERNAL, e.what());
  }
}

template <class T>
loom_status* config_get(const loom_config* config, const char* key, T* out, const char* type) {
  auto it = config->values.find(key ? key : "");
  if (it == config->values.end())
    return status_create(LOOM_STATUS_CODE_NOT_FOUND, (std::string("option \"") + (key ? key : "") +
                                                      "\" is not set and has no default").c_str());
  if (const T* v = std::get_if<T>(&it->second)) {
    *out = *v;
    return nullptr;
  }
  return status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT,
                       (std::string("option \"") + key + "\" is not declared as " + type).c_str());
}

loom_status* config_get_int(const loom_config* c, const char* key, int64_t* out) {
  return config_get<int64_t>(c, key, out, "int");
}
loom_status* config_get_float(const loom_config* c, const char* key, double* out) {
  return config_get<double>(c, key, out, "float");
}
loom_status* config_get_bool(const loom_config* c, const char* key, int32_t* out) {
  bool v = false;
  loom_status* s = config_get<bool>(c, key, &v, "bool");
  if (!s) *out = v ? 1 : 0;
  return s;
}
loom_status* config_get_string(const loom_config* c, const char* key, const char** out) {
  auto it = c->values.find(key ? key : "");
  if (it != c->values.end())
    if (const std::string* v = std::get_if<std::string>(&it->second)) {
      *out = v->c_str();
      return nullptr;
    }
  std::string ignored;
  return config_get<std::string>(c, key, &ignored, "string");
}
int32_t config_has(const loom_config* c, const char* key) { return c->values.count(key ? key : "") ? 1 : 0; }

}  // namespace

QuietPluginInfo::QuietPluginInfo() { ++quiet_info_scopes; }
QuietPluginInfo::~QuietPluginInfo() { --quiet_info_scopes; }

const loom_host_api* host_api() {
  static const loom_host_api api = [] {
    loom_host_api table{};
    table.struct_size = sizeof(table);
    table.abi_major = LOOM_ABI_MAJOR;
    table.abi_minor = LOOM_ABI_MINOR;
    table.status_create = &status_create;
    table.status_destroy = &status_destroy;
    table.status_get_code = &status_get_code;
    table.status_get_message = &status_get_message;
    table.log = &log;
    table.registry_add_component = &registry_add_component;
    table.config_get_int = &config_get_int;
    table.config_get_float = &config_get_float;
    table.config_get_bool = &config_get_bool;
    table.config_get_string = &config_get_string;
    table.config_has = &config_has;
    table.unit_boundary = &unit_boundary;
    table.tensor_parallel_collective = &tensor_parallel_collective;
    table.param_created = &param_created;
    table.param_write = &param_write;
    return table;
  }();
  return &api;
}

std::string take_status_message(loom_status* status) {
  if (status == nullptr) return "";
  std::string message = status->message.empty() ? "(no message)" : status->message;
  status_destroy(status);
  return message;
}

}  // namespace loom
