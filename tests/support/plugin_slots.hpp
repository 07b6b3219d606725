// plugin_slots.hpp: the real plugin files, loaded through the kernel's own registry and
// loader, and slots configured from them the way a manifest would (options validated,
// defaults filled in). For tests that drive one component in-process.
#pragma once

#include <doctest/doctest.h>

#include <toml++/toml.h>

#include <string>

#include "config/options.hpp"
#include "abi/instance.hpp"
#include "abi/plugin_loader.hpp"
#include "abi/registry.hpp"

namespace loom_test {

// Every plugin in the build's plugin folder, loaded once per process (plugins are never
// unloaded). keep_going: a broken unrelated plugin must not fail an unrelated test.
inline const loom::Registry& plugin_registry() {
  static const loom::Registry* registry = [] {
    auto* r = new loom::Registry();
    loom::load_plugins(*r, {{LOOM_PLUGIN_DIR, "LOOM_PLUGIN_DIR"}}, /*keep_going=*/true);
    return r;
  }();
  return *registry;
}

// A slot as `[<slot>] use = "<component>"` plus options would configure it.
inline loom::SlotConfig plugin_slot(loom_kind kind, const std::string& slot, const std::string& component,
                                    const toml::table& options = {}) {
  const loom::Component* c = plugin_registry().lookup(kind, component);
  REQUIRE_MESSAGE(c != nullptr, "no " << loom::kind_name(kind) << " \"" << component << "\" in " << LOOM_PLUGIN_DIR);
  loom::SlotConfig out{slot, c, {}};
  out.config.values = loom::resolve_options(options, c->options, "[" + slot + "] " + component, "test", {"use"});
  return out;
}

}  // namespace loom_test
