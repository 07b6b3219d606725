// within_deadline.hpp: a store request that may never return, run with a deadline. c10d's
// TCPStore client sets no socket timeout, so a request to a host whose cable was pulled waits
// as long as TCP retransmits (many minutes). The call runs on a thread of its own that is given
// up, detached, after the deadline; what it uses must be shared with it (shared_ptr captures),
// and the caller treats the missing answer as the host being lost.
#pragma once

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <thread>

namespace loom {

// call() within `deadline`: its result, or nothing when it did not return in time or threw.
template <class Result, class Call>
std::optional<Result> within(std::chrono::milliseconds deadline, Call call) {
  auto task = std::make_shared<std::packaged_task<Result()>>(std::move(call));
  std::future<Result> result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(deadline) != std::future_status::ready) return std::nullopt;
  try {
    return result.get();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace loom
