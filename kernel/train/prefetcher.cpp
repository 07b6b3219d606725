#include "train/prefetcher.hpp"

#include "base/cpu_threads.hpp"

namespace loom {

Prefetcher::Prefetcher(DatasetInstance& dataset, size_t depth, const at::Device& device)
    : dataset_(dataset), depth_(depth < 1 ? 1 : depth), device_(device), thread_([this] { produce(); }) {}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Prefetcher::produce() {
  enter_background_thread();
  Batch data_end;  // once a finite stream has ended, the queue repeats its end instead of asking again
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
      if (stop_) return;
    }
    try {
      Batch batch = data_end.end_of_data ? data_end : dataset_.next();  // outside the lock: the consumer keeps going
      if (batch.end_of_data) data_end = batch;
      if (device_.is_cuda() && !batch.end_of_epoch && !batch.end_of_data) {  // page-locked memory lets the copy overlap compute
        batch.inputs = batch.inputs.pin_memory().to(device_, /*non_blocking=*/true);
        batch.targets = batch.targets.pin_memory().to(device_, /*non_blocking=*/true);
        for (auto& field : batch.fields) field.second = field.second.pin_memory().to(device_, /*non_blocking=*/true);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = std::current_exception();
      stop_ = true;
    }
    changed_.notify_all();
  }
}

Batch Prefetcher::pop() {
  Batch batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty() || failure_ != nullptr; });
    if (queue_.empty()) std::rethrow_exception(failure_);
    batch = std::move(queue_.front());
    queue_.pop_front();
  }
  changed_.notify_all();  // after unlocking: the producer wakes to a free mutex
  return batch;
}

bool Prefetcher::data_ends_next() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto decisive = [&] {
    for (const Batch& b : queue_)
      if (!b.end_of_epoch) return true;
    return false;
  };
  changed_.wait(lock, [&] { return failure_ != nullptr || queue_.size() >= depth_ || decisive(); });
  for (const Batch& b : queue_)
    if (!b.end_of_epoch) return b.end_of_data;
  return false;
}

bool Prefetcher::front_is_epoch_end() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return failure_ != nullptr || !queue_.empty(); });
  return !queue_.empty() && queue_.front().end_of_epoch;
}

}  // namespace loom
