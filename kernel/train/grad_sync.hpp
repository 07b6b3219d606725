// grad_sync.hpp: data-parallel gradient all-reduce that overlaps backward. The flat gradient
// buffer is cut into buckets (reverse registration order, so the gradients backward produces
// first fill the first buckets). A post-hook on each parameter's gradient accumulator counts
// the parameters still missing from each bucket; when a bucket and every bucket before it are
// complete during the last micro-batch's backward, its all-reduce starts while backward goes on
// (in bucket order, the same on every rank).
//
// Sharded (FlatParams::shard()): buckets end at slice edges. "gradients" and "parameters"
// reduce each bucket to its owner only instead of all-reducing it, and once a reduce is done
// a bucket another rank owns is given back (train/cpu_memory.hpp release_memory), at most
// kReducesInFlight buckets behind backward: the gradients of the last micro-batch are never
// all resident at once. "optimizer" and "gradients" all-gather the parameter buffers after the
// optimizer updated each rank's slice (gather_params).
//
// The placed groups' buckets are summed over the placed replicas instead: under expert
// parallelism the ranks holding the same experts (train/expert_placement.hpp; their groups stay
// whole), under pipeline parallelism with stage-local layers the data and sequence ranks of the
// same stage (train/stage_placement.hpp), among which a sharded run cuts the stage's layers: they
// are reduced to their owner and all-gathered over those replicas.
#pragma once

#include <ATen/ATen.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "abi/compute_components.hpp"
#include "train/flat_params.hpp"

namespace loom {

// Calls ready each time autograd has added a gradient into param's .grad. Keep the returned
// handle (it owns the parameter's gradient accumulator) alive as long as the hook should run.
// Opaque because LibTorch's owning pointer to an autograd node changed: std::shared_ptr up
// to 2.11 at least, c10::intrusive_ptr in 2.15.
std::shared_ptr<const void> on_gradient_accumulated(const ModelParam& param, std::function<void()> ready);

// Which of pieces (views into the flat gradient buffers) each parameter's gradient shares bytes
// with, by address; per_piece[k] is set to how many parameters touch piece k.
std::vector<std::vector<size_t>> pieces_of_gradients(const std::vector<ModelParam>& params,
                                                     const std::vector<at::Tensor>& pieces,
                                                     std::vector<size_t>& per_piece);

class GradientSync {
 public:
  // placed_group: the ranks whose placed groups together make the model's (the expert group, or
  // the pipeline's stages; null when nothing is placed); placed_replicas: those holding this
  // rank's placed parameters (null: none but this one).
  GradientSync(const std::vector<ModelParam>& params, FlatParams& flat, Communicator& comm, int64_t bucket_bytes,
               Communicator* placed_group = nullptr, Communicator* placed_replicas = nullptr);
  ~GradientSync();

  // Before the backward of the last micro-batch: buckets start as soon as they are complete.
  void arm();
  // After that backward (armed or not): starts the buckets no hook started (unused parameters,
  // or every bucket when not armed) and waits for every all-reduce. Returns the fraction of
  // buckets that started during backward.
  double finish();
  // After the optimizer step of a sharded run: every rank's updated slice reaches every rank.
  void gather_params();
  // The global gradient norm (0-dim, on the device). In "gradients" mode each rank holds the
  // reduced values of its slice only, so the squares are summed across ranks; those of the
  // placed groups over the placed group.
  at::Tensor grad_norm();
  // [the squares of every gradient the optimizer will use, those of the named parameters'],
  // summed over the ranks holding other parts of them (tensor parallelism: named are those held
  // whole, whose squares every tensor rank has).
  at::Tensor square_sums(const std::set<std::string>& named);

 private:
  void on_gradient_ready(size_t param_index);

  void start(size_t bucket);
  // The ranks a group, placed or not, is summed (and cut) over; null: this rank alone.
  Communicator* summed_over(bool placed);
  void retire_oldest_reduce();  // waits for it, then gives back a bucket this rank does not own

  static constexpr size_t kReducesInFlight = 2;
  Communicator& comm_;
  Communicator* placed_group_;
  Communicator* placed_replicas_;
  FlatParams& flat_;
  std::vector<FlatParams::GradBucket> buckets_;       // views of the flat gradient buffers
  std::vector<std::vector<size_t>> param_buckets_;    // buckets each parameter touches
  std::vector<size_t> bucket_size_;                   // parameters touching each bucket
  std::vector<size_t> missing_;                       // this step: parameters not yet ready
  std::vector<bool> started_;
  std::vector<std::shared_ptr<const void>> accumulators_;  // keeps the hooks alive
  struct Reducing {
    size_t bucket;
    Communicator* over;
    uint64_t ticket;
  };
  std::deque<Reducing> reducing_;  // reduces in flight
  bool armed_ = false;
  bool placed_cut_ = false;  // a placed group is cut among its replicas (a stage's layers under ZeRO)
  size_t started_early_ = 0;
  size_t next_ = 0;  // this step: the first bucket not started (buckets start in order)
};

}  // namespace loom
