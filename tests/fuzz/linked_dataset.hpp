// linked_dataset.hpp: the vtable of the one dataset plugin compiled into a fuzz target
// (token_file, criteo_tsv), taken from its registration through the stand-in host
// (tests/support/standin_host.hpp), so the target drives it as the host does.
#pragma once

#include <loom/abi.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "fuzz_support.hpp"
#include "standin_host.hpp"

extern "C" const loom_plugin_info* loom_plugin_init(const loom_host_api* host);

struct loom_registry {
  const char* wanted = nullptr;              // the dataset's component name
  const loom_component* dataset = nullptr;  // that component, once registered
};

namespace loom_fuzz {

inline void quiet_log(loom_log_level, const char*, const char*) {}

inline loom_status* keep_wanted_dataset(loom_registry* r, const loom_component* c) {
  if (c->kind == LOOM_KIND_DATASET && std::strcmp(c->name, r->wanted) == 0) r->dataset = c;
  return nullptr;
}

// The linked plugin's dataset `component`, as the host would copy its vtable (known prefix).
inline loom_dataset_vtable linked_dataset_vtable(const char* component) {
  static const loom_host_api host = loom_standin::host_api(&quiet_log, &keep_wanted_dataset);
  const loom_plugin_info* info = loom_plugin_init(&host);
  loom_registry registry;
  registry.wanted = component;
  if (info == nullptr || info->register_components(&registry) != nullptr || registry.dataset == nullptr)
    finding(std::string("the ") + component + " plugin did not register its dataset");
  loom_dataset_vtable out{};
  std::memcpy(&out, registry.dataset->vtable,
              std::min(sizeof out, *static_cast<const size_t*>(registry.dataset->vtable)));
  return out;
}

}  // namespace loom_fuzz
