// prefetcher.hpp: draws batches from the dataset on a background thread into a bounded
// queue, so data time hides behind compute. One producer calls the dataset in order, which
// keeps the batch sequence deterministic.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "abi/compute_components.hpp"

namespace loom {

class Prefetcher {
 public:
  // On CUDA devices batches are pinned and copied with non_blocking on this thread.
  Prefetcher(DatasetInstance& dataset, size_t depth, const at::Device& device);
  ~Prefetcher();  // stops and joins the producer
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch; rethrows what the producer failed with.
  Batch pop();
  // Whether the next batch that is not an epoch end is the end of the data (ABI 1.7): waits
  // until the queue shows it. False when the producer failed (pop() then rethrows) or when the
  // queue is full of epoch ends (the step that draws on finds out).
  bool data_ends_next();
  // Whether the next batch pop() returns is an epoch end; waits for it (false on failure).
  bool front_is_epoch_end();

 private:
  void produce();

  DatasetInstance& dataset_;
  const size_t depth_;
  const at::Device device_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> queue_;
  std::exception_ptr failure_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every other member exists
};

}  // namespace loom
