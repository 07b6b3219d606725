// failure_message.hpp: the message of what a call throws, for tests that check it.
#pragma once

#include <exception>
#include <string>

namespace loom_test {

// The message of the exception fn throws ("" when it throws none).
template <class Fn>
std::string failure_message(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace loom_test
