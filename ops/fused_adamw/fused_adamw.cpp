#include <loom_ops/fused_adamw.hpp>

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

namespace loom_ops {
namespace {

// The per-element update. Each line repeats the rounding of the tensor op it replaces (the
// float constants, the operand order), so the fused and the tensor-op paths agree to the bit
// where the compiler does not contract a multiply and an add (the build turns that off).
struct Coefficients {
  bool decays;  // weight_decay > 0: the tensor-op path skips the decay op otherwise
  float decay, one_minus_beta1, beta2, one_minus_beta2, bias2_sqrt, eps, step;
};

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void update_range(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                  const float* __restrict mask, int64_t n, Coefficients c) {
  for (int64_t i = 0; i < n; ++i) {
    float w = p[i];
    if (c.decays) w = w + c.decay * w * mask[i];          // addcmul_(p, mask, -lr*wd)
    const float mi = m[i] + c.one_minus_beta1 * (g[i] - m[i]);  // lerp_(g, 1-beta1), weight < 0.5
    const float vi = v[i] * c.beta2 + c.one_minus_beta2 * g[i] * g[i];  // mul_(beta2).addcmul_(g, g, 1-beta2)
    const float denom = std::sqrt(vi) / c.bias2_sqrt + c.eps;  // sqrt, div_(bias2_sqrt), add_(eps)
    p[i] = w + c.step * mi / denom;                       // addcdiv_(m, denom, -lr/bias1)
    m[i] = mi;
    v[i] = vi;
  }
}

bool fusable(const at::Tensor& t, const at::Tensor& p) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.numel() == p.numel();
}

}  // namespace

void adamw_step(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                const at::Tensor& decay_mask, AdamWScratch& scratch, const AdamWStep& s) {
  at::NoGradGuard no_grad;
  if (p.is_cuda()) return adamw_step_libtorch_fused(p, grad, exp_avg, exp_avg_sq, decay_mask, scratch, s);
  const bool lerp_from_start = (1.0 - s.beta1) < 0.5;  // LibTorch's lerp switches formula at weight 0.5
  if (lerp_from_start && fusable(p, p) && fusable(grad, p) && fusable(exp_avg, p) && fusable(exp_avg_sq, p) &&
      fusable(decay_mask, p)) {
    const Coefficients c{s.weight_decay > 0, static_cast<float>(-s.lr * s.weight_decay), static_cast<float>(1.0 - s.beta1),
                         static_cast<float>(s.beta2), static_cast<float>(1.0 - s.beta2),
                         static_cast<float>(s.bias2_sqrt), static_cast<float>(s.eps),
                         static_cast<float>(-s.lr / s.bias1)};
    float* pp = p.data_ptr<float>();
    const float* gp = grad.data_ptr<float>();
    float* mp = exp_avg.data_ptr<float>();
    float* vp = exp_avg_sq.data_ptr<float>();
    const float* dp = decay_mask.data_ptr<float>();
    // 32K elements per task, as LibTorch's own elementwise grain: below that a thread costs more than it saves.
    at::parallel_for(0, p.numel(), 32768, [&](int64_t begin, int64_t end) {
      update_range(pp + begin, gp + begin, mp + begin, vp + begin, dp + begin, end - begin, c);
    });
    return;
  }
  adamw_step_tensor_ops(p, grad, exp_avg, exp_avg_sq, decay_mask, scratch, s);
}

void adamw_step_tensor_ops(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                           const at::Tensor& decay_mask, AdamWScratch& scratch, const AdamWStep& s) {
  at::NoGradGuard no_grad;
  if (!scratch.denom.defined()) scratch.denom = at::empty_like(p);
  if (s.weight_decay > 0) p.addcmul_(p, decay_mask, -s.lr * s.weight_decay);
  exp_avg.lerp_(grad, 1.0 - s.beta1);
  exp_avg_sq.mul_(s.beta2).addcmul_(grad, grad, 1.0 - s.beta2);
  at::sqrt_out(scratch.denom, exp_avg_sq).div_(s.bias2_sqrt).add_(s.eps);
  p.addcdiv_(exp_avg, scratch.denom, -s.lr / s.bias1);
}

void adamw_step_libtorch_fused(at::Tensor& p, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                               const at::Tensor& decay_mask, AdamWScratch& scratch, const AdamWStep& s) {
  at::NoGradGuard no_grad;
  if (s.weight_decay > 0) p.addcmul_(p, decay_mask, -s.lr * s.weight_decay);
  if (!scratch.step_count.defined()) scratch.step_count = at::zeros({}, p.options().dtype(at::kFloat));
  scratch.step_count.fill_(static_cast<double>(s.step));  // a kernel argument, no host round trip
  at::_fused_adamw_({p}, {grad}, {exp_avg}, {exp_avg_sq}, {}, {scratch.step_count}, s.lr, s.beta1, s.beta2,
                    /*weight_decay=*/0.0, s.eps, /*amsgrad=*/false, /*maximize=*/false);
}

}  // namespace loom_ops
