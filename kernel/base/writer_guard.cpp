#include "base/writer_guard.hpp"

#include <mutex>

namespace loom {
namespace {

std::mutex& guard_mutex() {
  static std::mutex m;
  return m;
}

std::function<void()>& registered() {
  static std::function<void()> check;
  return check;
}

}  // namespace

void set_writer_check(std::function<void()> check) {
  const std::lock_guard<std::mutex> hold(guard_mutex());
  registered() = std::move(check);
}

void check_still_writer() {
  // Held while the check runs: it may re-take the lock file, which two threads must not do at once.
  const std::lock_guard<std::mutex> hold(guard_mutex());
  if (registered()) registered()();
}

}  // namespace loom
