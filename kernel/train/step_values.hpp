// step_values.hpp: each step's loss and gradient norm, kept on the device until they are read:
// at a log step, a save, the end of the run, or every step when a hook says it reads them
// (loom_hook_needs_args, ABI 1.9). On a GPU a read waits for everything queued; reading once
// per log window lets the host queue the next steps while the device still runs this one.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace loom {

class StepValues {
 public:
  // One step's mean loss per token and its global gradient norm before clipping, both scalars
  // on the device. Nothing is read back.
  void add(const at::Tensor& loss, const at::Tensor& grad_norm);
  bool pending() const { return steps_ > 0; }

  struct Read {
    double last_loss = 0, last_grad_norm = 0;  // the newest step's
    double loss_sum = 0;                       // over the steps added since the last read
    int64_t nonfinite_steps = 0;               // of those, the steps whose loss was NaN or infinite
  };
  // Everything added since the last read, in one copy to the host; then starts over.
  Read read();

 private:
  at::Tensor sums_;  // (2) double: the loss sum and the count of non-finite losses
  at::Tensor last_;  // (2) double: the newest step's loss and gradient norm
  int64_t steps_ = 0;
};

}  // namespace loom
