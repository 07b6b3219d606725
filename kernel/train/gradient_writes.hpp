// gradient_writes.hpp: gradient accumulation without zero-then-add (#51). Each step's first
// gradient of a parameter is copied over what its slot of the flat gradient buffer still holds
// from the last step (a pre-hook on the parameter's gradient accumulator, which is then left
// nothing to add); later micro-batches and recomputed passes add to it as autograd always does.
// When the step's passes end, the slots no gradient reached (an expert no token chose, a layer
// the model skipped, another pipeline stage's layers) are zeroed, as far as they hold values
// from the last step (FlatParams::resident_gradients: reducing to owners, the rest was given
// back and reads as zeros). Per element of the first pass: one read and one write, where
// zeroing the buffer and then adding into it took a write, two reads and a write.
//
// Post-hooks on the same accumulators (train/grad_sync.hpp, train/parameter_shards.hpp) still
// run after each pass, the slot already holding the gradient.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "abi/compute_components.hpp"

namespace loom {

class GradientWrites {
 public:
  // params: the trainable dense parameters, after FlatParams has bound each .grad to its slot;
  // resident: FlatParams::resident_gradients().
  GradientWrites(const std::vector<ModelParam>& params, const std::vector<at::Tensor>& resident);
  GradientWrites(const GradientWrites&) = delete;
  GradientWrites& operator=(const GradientWrites&) = delete;
  ~GradientWrites();

  // A step begins: every slot holds last step's gradient, to be written over.
  void begin_step();
  // The step's forward and backward passes are done: zero the slots none of them reached,
  // before anything reads or communicates the gradients. Returns how many there were.
  int64_t end_passes();

  // Which slots the step's passes so far have written (in the order of the params given), and
  // setting that back: a CUDA graph's replay writes the slots its capture wrote without
  // running the hooks that note it, and a capture that failed wrote none of the slots its
  // hooks noted (train/micro_batch_graphs.hpp).
  std::vector<bool> written_slots() const;
  void set_written(const std::vector<bool>& slots);

  struct Slot {
    at::Tensor grad;   // the parameter's view into the flat gradient buffer
    at::Tensor stale;  // the part of it that holds last step's values (undefined: none)
    bool written = false;
  };

 private:
  std::vector<std::shared_ptr<Slot>> slots_;  // shared with the hooks, which may outlive this object
  std::vector<std::shared_ptr<const void>> accumulators_;  // keep the hooks alive
};

}  // namespace loom
