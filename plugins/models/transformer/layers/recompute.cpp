#include "layers/recompute.hpp"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include <loom/plugin.hpp>

namespace loom_gpt {
namespace {

// What the forward run saw, so that the run in backward sees the same.
struct FirstRun : torch::CustomClassHolder {
  std::function<Outputs(const at::Tensor&)> block;
  at::Device device = at::kCPU;
  at::Tensor cpu_rng, device_rng;  // generator states before the block drew anything
  bool cpu_autocast = false, cuda_autocast = false;
  at::ScalarType cpu_autocast_dtype = at::kBFloat16, cuda_autocast_dtype = at::kHalf;
};

at::Generator generator_of(const at::Device& device) {
  return device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
}

at::Tensor rng_state(const at::Device& device) {
  at::Generator gen = generator_of(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(const at::Device& device, const at::Tensor& state) {
  at::Generator gen = generator_of(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// For the length of the second run: the first run's RNG and autocast state; then back to what
// backward had, so checkpointing leaves no trace on the random numbers drawn afterwards.
class ReplayScope {
 public:
  explicit ReplayScope(const FirstRun& first) : first_(first) {
    cpu_rng_ = rng_state(at::kCPU);
    set_rng_state(at::kCPU, first.cpu_rng);
    if (first.device_rng.defined()) {
      device_rng_ = rng_state(first.device);
      set_rng_state(first.device, first.device_rng);
    }
    cpu_autocast_ = at::autocast::is_autocast_enabled(at::kCPU);
    cuda_autocast_ = at::autocast::is_autocast_enabled(at::kCUDA);
    cpu_dtype_ = at::autocast::get_autocast_dtype(at::kCPU);
    cuda_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    apply(first.cpu_autocast, first.cpu_autocast_dtype, first.cuda_autocast, first.cuda_autocast_dtype);
  }
  ~ReplayScope() {
    apply(cpu_autocast_, cpu_dtype_, cuda_autocast_, cuda_dtype_);
    set_rng_state(at::kCPU, cpu_rng_);
    if (device_rng_.defined()) set_rng_state(first_.device, device_rng_);
  }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;

 private:
  static void apply(bool cpu, at::ScalarType cpu_dtype, bool cuda, at::ScalarType cuda_dtype) {
    at::autocast::set_autocast_enabled(at::kCPU, cpu);
    at::autocast::set_autocast_dtype(at::kCPU, cpu_dtype);
    at::autocast::set_autocast_enabled(at::kCUDA, cuda);
    at::autocast::set_autocast_dtype(at::kCUDA, cuda_dtype);
  }
  const FirstRun& first_;
  at::Tensor cpu_rng_, device_rng_;
  bool cpu_autocast_, cuda_autocast_;
  at::ScalarType cpu_dtype_, cuda_dtype_;
};

// anchor: a tensor that requires grad, so that autograd runs backward through the block even
// when its input does not (the embeddings frozen: LoRA, [model] freeze). Without it the block's
// output would carry no gradient, and its parameters would get none: the run fails, or with
// every_n, the first block's adapters silently do not train.
struct Checkpoint : torch::autograd::Function<Checkpoint> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& /*anchor*/, c10::intrusive_ptr<FirstRun> first) {
    ctx->save_for_backward({x});
    ctx->saved_data["input_wants_grad"] = x.requires_grad();
    Outputs y = first->block(x);  // autograd records nothing inside a Function's forward
    for (const at::Tensor& out : y)
      if (!at::isFloatingType(out.scalar_type())) ctx->mark_non_differentiable({out});
    ctx->saved_data["first_run"] = at::IValue::make_capsule(std::move(first));
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto first = c10::static_intrusive_pointer_cast<FirstRun>(ctx->saved_data["first_run"].toCapsule());
    const at::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    Outputs y;
    {
      const ReplayScope replay(*first);
      const at::AutoGradMode record(true);
      y = first->block(input);
    }
    // Parameters' gradients accumulate where they always do (the host's flat buffer, with
    // its hooks); the input's gradient goes on to the block before.
    torch::autograd::variable_list outputs, grads;
    for (size_t i = 0; i < y.size(); ++i)
      if (grad_out[i].defined() && y[i].requires_grad()) outputs.push_back(y[i]), grads.push_back(grad_out[i]);
    if (!outputs.empty()) torch::autograd::backward(outputs, grads);
    return {ctx->saved_data["input_wants_grad"].toBool() ? input.grad() : at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void check_recompute_policy(const RecomputePolicy& policy, const std::string& component) {
  if (policy.mode != "none" && policy.mode != "full" && policy.mode != "every_n")
    throw loom::Error(component + ": activation_checkpointing = \"" + policy.mode +
                      "\": use \"none\", \"full\" (every block) or \"every_n\" (every checkpoint_every-th block)");
  if (policy.every < 1)
    throw loom::Error(component + ": checkpoint_every must be at least 1, got " + std::to_string(policy.every));
}

at::Tensor recomputed(std::function<at::Tensor(const at::Tensor&)> block, const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return block(x);  // evaluation, generation: nothing to keep
  return recomputed([block = std::move(block)](const at::Tensor& in) { return Outputs{block(in)}; }, x).front();
}

Outputs recomputed(std::function<Outputs(const at::Tensor&)> block, const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return block(x);
  auto first = c10::make_intrusive<FirstRun>();
  first->block = std::move(block);
  first->device = x.device();
  first->cpu_rng = rng_state(at::kCPU);
  if (!x.device().is_cpu()) first->device_rng = rng_state(x.device());
  first->cpu_autocast = at::autocast::is_autocast_enabled(at::kCPU);
  first->cuda_autocast = at::autocast::is_autocast_enabled(at::kCUDA);
  first->cpu_autocast_dtype = at::autocast::get_autocast_dtype(at::kCPU);
  first->cuda_autocast_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
  // A new tensor only when the input carries no gradient (the case above); else x stands in.
  const at::Tensor anchor = x.requires_grad() ? x : at::zeros({}, x.options()).requires_grad_(true);
  return Checkpoint::apply(x, anchor, std::move(first));
}

}  // namespace loom_gpt
