#include "train/step_values.hpp"

#include <ATen/core/grad_mode.h>

namespace loom {

void StepValues::add(const at::Tensor& loss, const at::Tensor& grad_norm) {
  at::NoGradGuard no_grad;
  // The norm in the loss's dtype first: the numbers the host printed when it read every step.
  const at::Tensor l = loss.to(at::kDouble), n = grad_norm.to(loss.scalar_type()).to(at::kDouble);
  const at::Tensor step = at::stack({l, l.isfinite().logical_not().to(at::kDouble)});
  sums_ = steps_ == 0 ? step : sums_ + step;  // doubles hold sums of float losses exactly
  last_ = at::stack({l, n});
  steps_ += 1;
}

StepValues::Read StepValues::read() {
  Read out;
  if (steps_ == 0) return out;
  const at::Tensor host = at::cat({sums_, last_}).to(at::kCPU);  // the one wait for the device
  const double* v = host.data_ptr<double>();
  out.loss_sum = v[0];
  out.nonfinite_steps = static_cast<int64_t>(v[1]);
  out.last_loss = v[2];
  out.last_grad_norm = v[3];
  sums_ = last_ = at::Tensor();
  steps_ = 0;
  return out;
}

}  // namespace loom
