// plugin_state.hpp: drives a plugin's state_save / state_load callbacks directly (datasets,
// hooks and trackers share the signature), for tests that check checkpoint state.
#pragma once

#include <doctest/doctest.h>

#include <loom/core.h>

#include <string>

#include "abi/host_api.hpp"

namespace loom_test {

// The bytes state_save writes; fails the test when the callback is absent or errs.
template <class Handle>
std::string save_plugin_state(loom_status* (*save)(Handle*, const loom_byte_writer*), Handle* handle) {
  std::string out;
  const loom_byte_writer writer = {sizeof(loom_byte_writer), &out, [](void* user, const void* data, size_t size) {
                                     static_cast<std::string*>(user)->append(static_cast<const char*>(data), size);
                                     return static_cast<loom_status*>(nullptr);
                                   }};
  REQUIRE_MESSAGE(bool(save), "no state_save");
  if (loom_status* s = save(handle, &writer)) FAIL("state_save failed: " << loom::take_status_message(s));
  return out;
}

// "" on success, else state_load's error message.
template <class Handle>
std::string load_plugin_state(loom_status* (*load)(Handle*, const void*, size_t), Handle* handle,
                              const std::string& state) {
  REQUIRE_MESSAGE(bool(load), "no state_load");
  return loom::take_status_message(load(handle, state.data(), state.size()));
}

}  // namespace loom_test
