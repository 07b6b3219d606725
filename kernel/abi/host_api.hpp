// host_api.hpp: the loom_host_api table the host lends to every plugin, and the host's side
// of the status convention.
#pragma once

#include <loom/abi.h>

#include <exception>
#include <optional>
#include <string>

#include "base/failure.hpp"
#include "abi/registry.hpp"

// Definitions of the ABI's opaque types live on the host side.
struct loom_status {
  loom_status_code code;
  std::string message;
};

struct loom_registry {
  loom::Registry* registry;
  loom::PluginRecord* plugin;
  std::optional<loom::Failure> failure;  // first failure while registering
};

namespace loom {

const loom_host_api* host_api();

// Frees status and returns its message ("" for NULL).
std::string take_status_message(loom_status* status);

// Runs body, a host callback called from a plugin's frames, where nothing may unwind: a
// std::exception becomes a status of `code` with its message, anything else an INTERNAL one
// saying `what` failed. body returns the callback's own status (NULL for success).
template <class Body>
loom_status* status_from(loom_status_code code, const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return host_api()->status_create(code, e.what());
  } catch (...) {
    return host_api()->status_create(LOOM_STATUS_CODE_INTERNAL, (std::string(what) + " failed").c_str());
  }
}

// While one lives, plugins' info lines are logged at debug level: a model build that only
// learns the flat layout (train/sliced_start.hpp) would repeat the real build's lines, or, run on
// the CPU for a GPU run, misstate them. Warnings and errors still show.
class QuietPluginInfo {
 public:
  QuietPluginInfo();
  ~QuietPluginInfo();
  QuietPluginInfo(const QuietPluginInfo&) = delete;
  QuietPluginInfo& operator=(const QuietPluginInfo&) = delete;
};

// The host's own torch fingerprint, compiled from the same macro plugins use.
const char* host_torch_fingerprint();

}  // namespace loom
