// kinds.hpp: what the plugin boundary knows about each kind, one row per kind (kinds.cpp). The
// loader, the registry, `host plugins` and `host describe` read this table; the manifest slot
// that picks a kind is a row of config/plan.cpp's slot table. A new kind is one row in each,
// plus its component instance (abi/*_components.hpp).
#pragma once

#include <loom/abi.h>

#include <cstddef>
#include <string>
#include <vector>

namespace loom {

struct KindInfo {
  loom_kind kind;
  const char* name;          // "model": in messages, `host plugins` and `host describe`
  const char* header;        // the SDK header that defines its vtable: "loom/model.h"
  bool torch;                // crosses opaque at::Tensor handles: the torch fingerprint must match
  std::vector<size_t> required_callbacks;  // vtable offsets that must hold a non-NULL function
};

// Every kind, in loom_kind order.
const std::vector<KindInfo>& kinds();
// The row of a kind; throws std::out_of_range for a value outside loom_kind.
const KindInfo& kind_info(loom_kind kind);
// "model", or "unknown" for a value outside loom_kind.
const char* kind_name(loom_kind kind);
bool kind_needs_torch(loom_kind kind);

// The names that cross the ABI (components, batch fields, reported metrics) are lower_snake_case.
inline bool is_lower_snake_case(const std::string& name) {
  return !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
}

}  // namespace loom
